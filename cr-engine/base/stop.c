/* The request to stop a dump (cr.h: cr_request_stop), set from a signal
 * handler and read by the dump and the page writers. */
#include <signal.h>

#include "cr.h"

static volatile sig_atomic_t stop_signal;

void cr_request_stop(int sig)
{
	stop_signal = sig;
}

int cr_stop_requested(void)
{
	return stop_signal;
}
