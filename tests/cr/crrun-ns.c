/* --own-ns: the test lives in mount, UTS and IPC namespaces of its own,
 * made the way a service manager sandboxes a service: a tmpfs on
 * $CRT_DIR/private (a private /tmp), $CRT_DIR/ro bound read-only,
 * $CRT_DIR/hidden covered by an empty read-only tmpfs of mode 0 (an
 * inaccessible path), the host name "crtest-ns".  kupdate dumps it with
 * --own-namespaces; each restore goes into the namespaces of a holder made
 * the same way anew (--namespaces-of), as systemd makes a unit's anew at
 * its start.  --ns-holder-differs: the holder lacks the read-only bind (a
 * unit whose configuration changed): the restore must refuse. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crrun.h"

pid_t ns_holder;

static int sub(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", workdir, name);
	return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

int ns_setup(bool differs)
{
	char priv[512], ro[512], hidden[512];

	if (sub(priv, sizeof(priv), "private") || sub(ro, sizeof(ro), "ro") ||
	    sub(hidden, sizeof(hidden), "hidden"))
		return -1;
	if (unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", priv, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m"))
		return -1;
	if (!differs && (mount(ro, ro, NULL, MS_BIND, NULL) ||
			 mount(NULL, ro, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL)))
		return -1;
	if (mount("tmpfs", hidden, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=000,size=4k") ||
	    sethostname("crtest-ns", 9))
		return -1;
	return 0;
}

/* a holder in new namespaces made as the test's were; 0 or -1 */
int ns_holder_start(void)
{
	int p[2];
	char c;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ns_setup(o.ns_holder_differs))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		alarm(300); /* bounded, whatever happens to the runner */
		pause();
		_exit(0);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1) {
		close(p[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		diag("cannot make the namespaces of a holder: %s", strerror(errno));
		return -1;
	}
	close(p[0]);
	ns_holder = pid;
	return 0;
}

void ns_holder_stop(void)
{
	if (ns_holder > 0) {
		kill(ns_holder, SIGKILL);
		waitpid(ns_holder, NULL, 0);
	}
	ns_holder = 0;
}

/* the restored root lives in the holder's namespaces */
int ns_check_restored(pid_t root)
{
	static const char *const kinds[] = { "mnt", "uts", "ipc" };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char a[64], b[64];
		struct stat x, y;

		snprintf(a, sizeof(a), "/proc/%d/ns/%s", root, kinds[i]);
		snprintf(b, sizeof(b), "/proc/%d/ns/%s", ns_holder, kinds[i]);
		if (stat(a, &x) || stat(b, &y) || x.st_ino != y.st_ino) {
			diag("FAIL: the restored root %d is not in the %s namespace of the "
			     "holder %d",
			     root, kinds[i], ns_holder);
			return -1;
		}
	}
	return 0;
}
