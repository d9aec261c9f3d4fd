/* The sandbox ("pause") container of every pod on the real node: it holds the pod's namespaces open,
 * reaps orphans as PID 1 of a shared PID namespace would, and exits on SIGINT or SIGTERM. Built static
 * (e2e/realnode/pause.py), so its image is this one file: no registry holds the upstream pause image
 * here. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) { _exit(128 + signo); }

static void reap(int signo) {
    (void)signo;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
