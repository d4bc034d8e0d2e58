/* screen.c: raw keyboard and alternate screen for the --top view, restored on every way out. */
#include "screen.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "xmalloc.h"

#define ENTER "\033[?1049h\033[?25l\033[H\033[2J"   /* alternate screen, hide cursor, clear */
#define LEAVE "\033[?25h\033[?1049l"                 /* show cursor, main screen */

struct trc_screen {
	struct ev_loop *loop;
	int in_fd, out_fd;
	bool raw;               /* in_fd's termios is changed: saved holds the original */
	struct termios saved;
	ev_io key_w;
	ev_signal winch_w, tstp_w;
	trc_screen_key_fn *fn;
	void *ctx;
};

/* The open screen, for the fatal-signal handler; NULL when none. */
static struct trc_screen *volatile active;

/* The signals that kill the client without passing through the loop. */
static const int fatal_signals[] = { SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
#define NFATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))

static unsigned
env_size(const char *name, unsigned fallback)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (s == NULL || *s == '\0')
		return fallback;
	v = strtol(s, &end, 10);
	return *end == '\0' && v > 0 && v < 100000 ? (unsigned)v : fallback;
}

unsigned
trc_screen_columns(int fd)
{
	struct winsize ws;

	if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return env_size("COLUMNS", TRC_SCREEN_COLUMNS);
}

unsigned
trc_screen_lines(int fd)
{
	struct winsize ws;

	if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0)
		return ws.ws_row;
	return env_size("LINES", TRC_SCREEN_LINES);
}

/* Async-signal-safe: write() and tcsetattr() only. */
static void
put(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* Gives the terminal back. Async-signal-safe. */
static void
restore(struct trc_screen *s)
{
	if (s->raw)
		tcsetattr(s->in_fd, TCSAFLUSH, &s->saved);
	put(s->out_fd, LEAVE, strlen(LEAVE));
}

/* Takes the terminal (again). */
static void
take(struct trc_screen *s)
{
	struct termios t = s->saved;

	if (s->raw) {
		t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		tcsetattr(s->in_fd, TCSAFLUSH, &t);
	}
	put(s->out_fd, ENTER, strlen(ENTER));
}

/* Restores the terminal, then dies of the same signal (SA_NODEFER: it is not blocked here). */
static void
on_fatal(int sig)
{
	struct sigaction dfl;

	if (active != NULL)
		restore(active);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	raise(sig);
}

static void
catch_fatal(bool on)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on ? on_fatal : SIG_DFL;
	sa.sa_flags = on ? SA_NODEFER : 0;
	for (size_t i = 0; i < NFATAL; i++)
		sigaction(fatal_signals[i], &sa, NULL);
}

static void
on_key(struct ev_loop *loop, ev_io *w, int revents)
{
	struct trc_screen *s = w->data;
	char buf[64];
	ssize_t n = read(s->in_fd, buf, sizeof(buf));

	(void)revents;
	if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
		ev_io_stop(loop, w);    /* no more keys: signals still work */
		return;
	}
	for (ssize_t i = 0; i < n; i++)
		s->fn(s->ctx, (unsigned char)buf[i]);
}

static void
on_winch(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct trc_screen *s = w->data;

	(void)loop, (void)revents;
	s->fn(s->ctx, TRC_SCREEN_REDRAW);
}

/* Ctrl+Z: give the terminal back, stop; once continued, take it again and redraw. */
static void
on_tstp(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct trc_screen *s = w->data;

	(void)loop, (void)revents;
	restore(s);
	kill(getpid(), SIGSTOP);
	take(s);
	s->fn(s->ctx, TRC_SCREEN_REDRAW);
}

static void
watch(struct trc_screen *s)
{
	ev_signal_init(&s->winch_w, on_winch, SIGWINCH);
	ev_signal_init(&s->tstp_w, on_tstp, SIGTSTP);
	s->winch_w.data = s->tstp_w.data = s;
	ev_signal_start(s->loop, &s->winch_w);
	ev_signal_start(s->loop, &s->tstp_w);
	if (!s->raw)
		return;
	ev_io_init(&s->key_w, on_key, s->in_fd, EV_READ);
	s->key_w.data = s;
	ev_io_start(s->loop, &s->key_w);
}

struct trc_screen *
trc_screen_open(struct ev_loop *loop, int in_fd, int out_fd, trc_screen_key_fn *fn, void *ctx)
{
	struct trc_screen *s = xcalloc(1, sizeof(*s));

	s->loop = loop;
	s->in_fd = in_fd;
	s->out_fd = out_fd;
	s->fn = fn;
	s->ctx = ctx;
	s->raw = isatty(in_fd) && tcgetattr(in_fd, &s->saved) == 0;
	/* The handler must find the saved state complete before it can run. */
	active = s;
	catch_fatal(true);
	take(s);
	watch(s);
	return s;
}

void
trc_screen_close(struct trc_screen *s)
{
	if (s == NULL)
		return;
	ev_io_stop(s->loop, &s->key_w);
	ev_signal_stop(s->loop, &s->winch_w);
	ev_signal_stop(s->loop, &s->tstp_w);
	restore(s);
	catch_fatal(false);
	active = NULL;
	free(s);
}

void
trc_screen_frame(struct trc_buf *out, const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	trc_buf_adds(out, "\033[H");
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		trc_buf_add(out, p, n);
		trc_buf_adds(out, nl ? "\033[K\n" : "\033[K");
		p += n + (nl != NULL);
	}
	trc_buf_adds(out, "\033[J");
}
