/* sink.h: where a session's decoded trace events go: the call-tree printer or an exporter. */
#ifndef TRC_SINK_H
#define TRC_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "decode.h"

/* What a sink does; see trc_trace_feed() for the meaning of each. Main thread. */
struct trc_sink_ops {
	int (*feed)(void *impl, const struct trc_message *m);   /* 0, or -1: see error */
	void (*set_clock)(void *impl, uint64_t mono_ns, uint64_t real_ns);
	const char *(*error)(const void *impl);
	uint64_t (*lost)(const void *impl);     /* events TRC_EV_LOST reported so far */
	void (*close)(void *impl);              /* no more events: end, and free what is the sink's */
	/* The loop idles (now in seconds): true while lines are held (trace.h); may be NULL. */
	bool (*idle)(void *impl, double now);
};

/* A sink is two pointers, passed by value; impl NULL means none (not tracing, or closed). */
struct trc_sink {
	const struct trc_sink_ops *ops;
	void *impl;
};

static inline bool
trc_sink_active(const struct trc_sink *s)
{
	return s->impl != NULL;
}

static inline int
trc_sink_feed(struct trc_sink *s, const struct trc_message *m)
{
	return s->ops->feed(s->impl, m);
}

static inline void
trc_sink_set_clock(struct trc_sink *s, uint64_t mono_ns, uint64_t real_ns)
{
	s->ops->set_clock(s->impl, mono_ns, real_ns);
}

static inline const char *
trc_sink_error(const struct trc_sink *s)
{
	return s->ops->error(s->impl);
}

static inline uint64_t
trc_sink_lost(const struct trc_sink *s)
{
	return s->ops->lost(s->impl);
}

static inline bool
trc_sink_idle(struct trc_sink *s, double now)
{
	return s->impl != NULL && s->ops->idle != NULL && s->ops->idle(s->impl, now);
}

/* Closes the sink if it is open; afterwards it is inactive. */
static inline void
trc_sink_close(struct trc_sink *s)
{
	if (s->impl != NULL)
		s->ops->close(s->impl);
	s->impl = NULL;
}

#endif
