/* repl.c: -i: a prompt on the terminal (libedit) or lines from a pipe, each run in the process. */
#include "repl.h"

#include <errno.h>
#include <locale.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <editline/readline.h>

#include "buf.h"
#include "escape.h"
#include "xmalloc.h"

#define HISTORY_FILE ".tracer_history"
#define HISTORY_MAX 1000
#define READ_CHUNK 4096
#define EVAL_OVERHEAD 64        /* bytes of an EVAL message besides its text */

enum repl_state {
	R_WAITING,      /* not attached yet */
	R_READING,      /* reading a line: on a terminal, the prompt is up */
	R_CHECKING,     /* asked the process whether the lines so far are whole Ruby */
	R_RUNNING,      /* asked it to run them */
	R_LEAVING,      /* exit, Ctrl+D or the end of the input: detaching */
};

struct trc_repl {
	struct ev_loop *loop;
	struct trc_output *out;
	struct trc_session *s;          /* NULL until attached */
	pid_t pid;
	enum repl_state state;
	bool tty;               /* stdin and stdout are a terminal: libedit edits the lines */
	bool prompting;         /* libedit's handler is installed: the prompt is on the screen */
	bool eof;               /* not a terminal: the input has ended */
	bool interrupted;       /* Ctrl+C while the process checked or ran the lines */
	ev_io in_w;
	ev_signal winch_w;
	struct trc_buf lines;   /* the expression so far: its lines, each ending in '\n' */
	struct trc_buf in;      /* not a terminal: bytes read that make no whole line yet */
	char prompt[32], more[32];      /* the prompt, and the one of a line that goes on */
	char *history;          /* the history file, or NULL */
};

/* libedit calls back with the line alone: the REPL it belongs to is this one. */
static struct trc_repl *active;

static void show_prompt(struct trc_repl *r);

/* The terminal's line is ours no more: libedit off, the terminal as it was, stdin unwatched. */
static void
stop_reading(struct trc_repl *r)
{
	ev_io_stop(r->loop, &r->in_w);
	if (!r->prompting)
		return;
	rl_callback_handler_remove();
	r->prompting = false;
	trc_output_open_line(r->out, NULL, NULL);
}

/* Something else is printed while the prompt is up (the process exited): under it, not on it. */
static void
close_prompt(void *owner)
{
	struct trc_repl *r = owner;

	stop_reading(r);
	fputs("\n", stdout);
	fflush(stdout);
}

static void
leave(struct trc_repl *r)
{
	stop_reading(r);
	r->state = R_LEAVING;
	trc_session_stop(r->s, TRC_STOP_END);
}

/* Asks the process about the lines so far. */
static void
ask(struct trc_repl *r, enum repl_state next, enum trc_eval_kind kind)
{
	/* The session copies a C string: the NUL goes after the bytes, not among them. */
	trc_buf_addc(&r->lines, '\0');
	r->lines.len--;
	r->state = next;
	if (trc_session_ask(r->s, kind, r->lines.data) < 0)
		leave(r);       /* the session is over: its done callback ends the run */
}

static bool
blank(const char *line)
{
	return line[strspn(line, " \t\r")] == '\0';
}

/* "exit" or "quit" as the whole of a first line: leave, without running anything. */
static bool
is_exit(const char *line)
{
	size_t start = strspn(line, " \t"), n = strcspn(line + start, " \t\r");

	return line[start + n + strspn(line + start + n, " \t\r")] == '\0' &&
	       ((n == 4 && strncmp(line + start, "exit", 4) == 0) ||
		(n == 4 && strncmp(line + start, "quit", 4) == 0));
}

/*
 * A line typed or read; NULL at the end of the input (Ctrl+D). Returns true when the process
 * was asked something, or the REPL leaves: nothing more is read until it answers.
 */
static bool
take_line(struct trc_repl *r, const char *line)
{
	if (line == NULL) {
		leave(r);
		return true;
	}
	if (r->tty && !blank(line))
		add_history(line);
	if (r->lines.len == 0 && is_exit(line)) {
		leave(r);
		return true;
	}
	if (r->lines.len == 0 && blank(line))
		return false;
	/* The agent takes no longer message (tracer_protocol.h): said here, not refused there. */
	if (r->lines.len + strlen(line) + 1 > TRC_MAX_MESSAGE - EVAL_OVERHEAD) {
		fprintf(stderr, "tracer: this code is over %u MiB, the most one message carries: "
			"not run\n", TRC_MAX_MESSAGE >> 20);
		r->lines.len = 0;
		return false;
	}
	trc_buf_adds(&r->lines, line);
	trc_buf_addc(&r->lines, '\n');
	ask(r, R_CHECKING, TRC_EVAL_COMPLETE);
	return true;
}

/* libedit's callback: a whole line (malloc'ed, without its newline), or NULL for Ctrl+D. */
static void
on_line(char *line)
{
	struct trc_repl *r = active;
	bool asked;

	/* Off while the process works: typed keys wait in the terminal, Ctrl+C is a signal. */
	stop_reading(r);
	if (line == NULL)
		fputs("\n", stdout);    /* Ctrl+D left the cursor after the prompt */
	asked = take_line(r, line);
	free(line);
	if (!asked)
		show_prompt(r);
}

/* Not a terminal: the next whole line of what was read, or NULL; the caller frees it. */
static char *
next_line(struct trc_repl *r)
{
	char *nl = r->in.len > 0 ? memchr(r->in.data, '\n', r->in.len) : NULL;
	size_t n = nl != NULL ? (size_t)(nl - r->in.data) : r->in.len;
	char *line;

	if (nl == NULL && (!r->eof || r->in.len == 0))
		return NULL;
	line = xstrndup(r->in.data, n);
	trc_buf_consume(&r->in, n + (nl != NULL));
	return line;
}

/* Not a terminal: takes the lines read already, then waits for more (or leaves at the end). */
static void
read_lines(struct trc_repl *r)
{
	char *line;

	while ((line = next_line(r)) != NULL) {
		bool asked = take_line(r, line);

		free(line);
		if (asked)
			return;
	}
	if (r->eof)
		take_line(r, NULL);
	else
		ev_io_start(r->loop, &r->in_w);
}

static void
on_input(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_repl *r = w->data;
	char buf[READ_CHUNK];
	ssize_t n;

	(void)loop, (void)revents;
	if (r->tty) {
		rl_callback_read_char();        /* calls on_line once a line is whole */
		return;
	}
	n = read(STDIN_FILENO, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		r->eof = true;
	else
		trc_buf_add(&r->in, buf, (size_t)n);
	ev_io_stop(r->loop, &r->in_w);
	read_lines(r);
}

static void
on_winch(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop, (void)w, (void)revents;
	rl_resize_terminal();
}

/* Ready for the next line: what was printed goes out first, then the prompt. */
static void
show_prompt(struct trc_repl *r)
{
	r->state = R_READING;
	trc_output_flush(r->out);
	if (!r->tty) {
		read_lines(r);
		return;
	}
	fflush(stderr);
	rl_callback_handler_install(r->lines.len > 0 ? r->more : r->prompt, on_line);
	r->prompting = true;
	trc_output_open_line(r->out, r, close_prompt);
	ev_io_start(r->loop, &r->in_w);
}

/* The value's inspect, or the error (with its lines), escaped: they come from the process. */
static void
print_answer(struct trc_repl *r, bool ok, const char *text, size_t len)
{
	char *safe = ok ? trc_escape_dup(text, len) : trc_escape_lines_dup(text, len);

	if (ok) {
		trc_output_write(r->out, "=> ", 3);
		trc_output_write(r->out, safe, strlen(safe));
		trc_output_putc(r->out, '\n');
		trc_output_flush(r->out);
	} else {
		trc_output_flush(r->out);
		fprintf(stderr, "%s\n", safe);
	}
	free(safe);
}

void
trc_repl_answer(struct trc_repl *r, bool ok, const char *text, size_t len)
{
	bool incomplete = ok && len == 10 && memcmp(text, "incomplete", 10) == 0;

	if (r->state == R_CHECKING && !r->interrupted && !incomplete) {
		/* Whole Ruby, or a syntax error that running it will show. */
		ask(r, R_RUNNING, TRC_EVAL_REPL);
		return;
	}
	if (r->state == R_RUNNING)
		print_answer(r, ok, text, len);
	else if (r->state != R_CHECKING)
		return;
	/* Run, abandoned, or a line more is needed (then the lines so far stay). */
	if (r->state == R_RUNNING || r->interrupted)
		r->lines.len = 0;
	r->interrupted = false;
	show_prompt(r);
}

bool
trc_repl_interrupt(struct trc_repl *r)
{
	switch (r->state) {
	case R_READING:
		if (!r->tty)
			return false;
		stop_reading(r);
		fputs("^C\n", stdout);
		r->lines.len = 0;
		show_prompt(r);
		return true;
	case R_CHECKING:
	case R_RUNNING:
		if (r->interrupted)
			return false;
		r->interrupted = true;
		trc_session_interrupt(r->s);
		return true;
	case R_WAITING:
	case R_LEAVING:
		break;
	}
	return false;
}

void
trc_repl_start(struct trc_repl *r, struct trc_session *s)
{
	r->s = s;
	show_prompt(r);
}

/* ~/.tracer_history, or NULL without a home. */
static char *
history_path(void)
{
	const char *home = getenv("HOME");
	struct passwd pw, *found = NULL;
	char buf[4096];

	if ((home == NULL || *home == '\0') &&
	    getpwuid_r(getuid(), &pw, buf, sizeof(buf), &found) == 0 && found != NULL)
		home = found->pw_dir;
	return home != NULL && *home != '\0' ? xasprintf("%s/%s", home, HISTORY_FILE) : NULL;
}

/*
 * libedit's state, once. Its signal handlers stay off: at SIGINT they would kill(0, SIGINT)
 * the whole process group after restoring the terminal, while the loop's handler is the one
 * that decides what Ctrl+C does; the terminal is restored by rl_callback_handler_remove.
 */
static void
editor_init(struct trc_repl *r)
{
	setlocale(LC_CTYPE, "");
	rl_catch_signals = 0;
	rl_catch_sigwinch = 0;
	rl_readline_name = "tracer";
	using_history();
	stifle_history(HISTORY_MAX);
	r->history = history_path();
	if (r->history != NULL)
		read_history(r->history);       /* none yet is fine */
	ev_signal_init(&r->winch_w, on_winch, SIGWINCH);
	ev_signal_start(r->loop, &r->winch_w);
}

struct trc_repl *
trc_repl_new(struct ev_loop *loop, struct trc_output *out, pid_t pid)
{
	struct trc_repl *r = xcalloc(1, sizeof(*r));

	r->loop = loop;
	r->out = out;
	r->pid = pid;
	r->state = R_WAITING;
	r->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	snprintf(r->prompt, sizeof(r->prompt), "tracer %d> ", (int)pid);
	snprintf(r->more, sizeof(r->more), "tracer %d* ", (int)pid);
	trc_buf_init(&r->lines);
	trc_buf_init(&r->in);
	ev_io_init(&r->in_w, on_input, STDIN_FILENO, EV_READ);
	r->in_w.data = r;
	if (r->tty)
		editor_init(r);
	active = r;
	return r;
}

void
trc_repl_free(struct trc_repl *r)
{
	stop_reading(r);
	if (r->tty) {
		ev_signal_stop(r->loop, &r->winch_w);
		/* Only its owner reads it: lines may hold secrets. */
		if (r->history != NULL && (write_history(r->history) != 0 ||
					   chmod(r->history, 0600) < 0))
			fprintf(stderr, "tracer: cannot save the history in %s\n", r->history);
	}
	trc_buf_release(&r->lines);
	trc_buf_release(&r->in);
	free(r->history);
	if (active == r)
		active = NULL;
	free(r);
}
