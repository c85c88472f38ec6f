/* Human output on a terminal: colours, and the progress of long dumps.
 * Colours only when the stream is a terminal, NO_COLOR is unset and TERM
 * is not "dumb"; pipes, files and --json never get escape sequences. */
#ifndef KUPDATE_TERM_H
#define KUPDATE_TERM_H

#include <stdbool.h>
#include <stdio.h>

#include "cr.h"

struct json_object;

enum term_colour { T_RESET, T_BOLD, T_RED, T_GREEN, T_YELLOW, T_DIM };

bool term_use_colour(FILE *f);
/* the escape sequence for c, or "" when f gets no colours */
const char *term_c(FILE *f, enum term_colour c);

/* o as indented JSON and a newline (json-c) */
void json_print(struct json_object *o, FILE *f);

/* A cr_dump_opts.progress hook: "dumping NAME: 3/5 processes, 812 MiB
 * (410 MiB/s)" rewritten in place on stderr, at most ten times a second,
 * the last one left on its line; nothing unless stderr is a terminal. */
struct term_progress {
	const char *what; /* the unit or "pid N" */
	bool active;	  /* stderr is a terminal */
	bool shown;	  /* a line is on the screen */
	int64_t t_start, t_last;
};
void term_progress_init(struct term_progress *tp, const char *what);
void term_progress(const struct cr_dump_progress *p, void *arg);
/* erase the progress line */
void term_progress_done(struct term_progress *tp);

/* SIGINT, SIGTERM and SIGHUP while units or trees are being stopped and
 * dumped: the first asks the dumps to stop (cr_request_stop: what was
 * stopped resumes, nothing is lost) and says so on stderr; a second one
 * kills kupdate at once.  stop_signals_ignore(): past the point of no
 * return (the units are gone, the kexec must happen). */
void stop_signals_catch(void);
void stop_signals_ignore(void);

#endif
