/* Colours and progress on a terminal (term.h). */
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cr-util.h"
#include "term.h"

bool term_use_colour(FILE *f)
{
	const char *term = getenv("TERM");
	const char *no = getenv("NO_COLOR");

	if (no && *no)
		return false;
	if (!term || !*term || !strcmp(term, "dumb"))
		return false;
	return isatty(fileno(f));
}

const char *term_c(FILE *f, enum term_colour c)
{
	static const char *const seq[] = {
		[T_RESET] = "\033[0m",	[T_BOLD] = "\033[1m",	 [T_RED] = "\033[1;31m",
		[T_GREEN] = "\033[32m", [T_YELLOW] = "\033[33m", [T_DIM] = "\033[2m",
	};

	return term_use_colour(f) ? seq[c] : "";
}

void term_progress_init(struct term_progress *tp, const char *what)
{
	memset(tp, 0, sizeof(*tp));
	tp->what = what;
	tp->active = isatty(STDERR_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb");
	tp->t_start = now_ns(CLOCK_MONOTONIC);
}

static void human(char *buf, size_t len, double bytes)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (bytes >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

void term_progress(const struct cr_dump_progress *p, void *arg)
{
	struct term_progress *tp = arg;
	int64_t now = now_ns(CLOCK_MONOTONIC);
	double s = (now - tp->t_start) / 1e9;
	char b[32], r[32];

	if (!tp->active)
		return;
	/* at most ten lines a second, and always the last one */
	if (tp->shown && now - tp->t_last < 100000000 && p->processes_done < p->processes)
		return;
	tp->t_last = now;
	human(b, sizeof(b), p->bytes);
	human(r, sizeof(r), s > 0 ? p->bytes / s : 0);
	fprintf(stderr, "\r\033[Kdumping %s: %u/%u processes, %s (%s/s)", tp->what,
		p->processes_done, p->processes, b, r);
	/* the last one stays, so that what the dump logs next starts on a
	 * line of its own */
	if (p->processes_done >= p->processes) {
		fputc('\n', stderr);
		tp->shown = false;
	} else {
		tp->shown = true;
	}
	fflush(stderr);
}

void term_progress_done(struct term_progress *tp)
{
	if (tp->active && tp->shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	tp->shown = false;
}

void json_print(struct json_object *o, FILE *f)
{
	fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							JSON_C_TO_STRING_NOSLASHESCAPE),
	      f);
	fputc('\n', f);
}

static void on_stop(int sig)
{
	static const char msg[] = "\nkupdate: interrupted: stopping at the next step, what was "
				  "stopped resumes (again to kill kupdate at once)\n";
	int saved = errno;

	/* the second one */
	if (cr_stop_requested()) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	cr_request_stop(sig);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) {
		/* nowhere to say it */
	}
	errno = saved;
}

static void stop_signals(void (*fn)(int))
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { 0 };

	sa.sa_handler = fn;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

void stop_signals_catch(void)
{
	stop_signals(on_stop);
}

void stop_signals_ignore(void)
{
	stop_signals(SIG_IGN);
}
