/* Running processes, for the engine's caller (cr.h): the orchestrator
 * reserves the ids a dump will save before it dumps, and tells a process
 * from another of the same pid by its start time, without reading /proc
 * itself. */
#include "cr.h"
#include "log.h"
#include "proc.h"
#include "util.h"

int cr_process_start(pid_t pid, unsigned long long *ticks)
{
	struct proc_stat st;
	int ret = parse_stat(pid, 0, &st);

	if (ret)
		return ret;
	*ticks = st.starttime;
	return 0;
}

int cr_process_parent(pid_t pid, pid_t *ppid)
{
	struct proc_stat st;
	int ret = parse_stat(pid, 0, &st);

	if (ret)
		return ret;
	*ppid = st.ppid;
	return 0;
}

int cr_process_ids(pid_t pid, pid_t **ids, size_t *nr)
{
	struct proc_stat st;
	_cleanup_free_ pid_t *tids = NULL;
	pid_t *v;
	int nt = list_tasks(pid, &tids), ret;

	if (nt < 0)
		return nt;
	ret = parse_stat(pid, 0, &st);
	if (ret)
		return ret;
	v = xrealloc_array(*ids, *nr + (size_t)nt + 2, sizeof(*v));
	if (!v)
		return -ENOMEM;
	*ids = v;
	for (int t = 0; t < nt; t++)
		v[(*nr)++] = tids[t];
	*nr += (size_t)cr_group_ids(pid, st.pgid, st.sid, v + *nr);
	return 0;
}
