/* bench_loopback.c -- the kernel's floor under a relay: what one client-tick
 * of socket work costs on this machine, with no Tessera code at all.
 *
 *   bench-loopback [--json] [--clients N] [--ticks T] [--view-bytes B] [--move-bytes M]
 *
 * A baseapp's work per client per tick is, at the least, one read of the
 * client's move and one write of its ViewUpdate; a bot's is the mirror
 * image. Over loopback TCP the kernel runs the receiver's side of a write
 * (its TCP input, its wakeup) inside the writer's system call, so those two
 * calls carry most of both ends' network cost. This bench opens N TCP
 * connections on 127.0.0.1 and, for T ticks, does for each of them what a
 * relay does (epoll for the moves, read each, write each client B bytes)
 * and what a client does (read its B bytes, write M bytes), the clients in
 * a child process as the bots are, and each side counts its own CPU (user
 * and system, getrusage). It prints microseconds per client-tick for each
 * side: the load kit's
 * baseapp and bots figures can be held against them (bench/README.md).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_args.h"

/* CPU this process has used, user and system, in seconds. */
static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 + (double)usage.ru_stime.tv_sec +
           (double)usage.ru_stime.tv_usec / 1e6;
}

/* Exits (status 1): a failed step ends the run, and the exit returns the
 * sockets and buffers main holds. */
static _Noreturn void fail(const char *what) {
    fprintf(stderr, "bench-loopback: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Reads exactly `length` bytes (the sockets are blocking). */
static int read_all(int fd, uint8_t *buffer, size_t length) {
    size_t got = 0;
    while (got < length) {
        ssize_t n = read(fd, buffer + got, length - got);
        if (n <= 0) return -1;
        got += (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv) {
    int clients = 1000, ticks = 200, json = 0;
    size_t view_bytes = 90, move_bytes = 30; /* the load kit's uniform-1k: ~85 B out, ~26 B in per tick */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--clients") == 0 && i + 1 < argc)
            clients = bench_int_arg(argv[++i], 0);
        else if (strcmp(argv[i], "--ticks") == 0 && i + 1 < argc)
            ticks = bench_int_arg(argv[++i], 0);
        else if (strcmp(argv[i], "--view-bytes") == 0 && i + 1 < argc)
            view_bytes = (size_t)bench_int_arg(argv[++i], 0);
        else if (strcmp(argv[i], "--move-bytes") == 0 && i + 1 < argc)
            move_bytes = (size_t)bench_int_arg(argv[++i], 0);
        else {
            fprintf(stderr,
                    "usage: bench-loopback [--json] [--clients N] [--ticks T] [--view-bytes B] [--move-bytes M]\n");
            return 2;
        }
    }
    if (clients < 1 || ticks < 1 || view_bytes < 1 || move_bytes < 1 || view_bytes > 65536 || move_bytes > 65536)
        return 2;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t address_length = sizeof address;
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listener, 4096) != 0 || getsockname(listener, (struct sockaddr *)&address, &address_length) != 0)
        fail("listen on 127.0.0.1");
    int *relay = calloc((size_t)clients, sizeof *relay), *client = calloc((size_t)clients, sizeof *client);
    int epoll = epoll_create1(0);
    for (int i = 0; i < clients; i++) {
        client[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (client[i] < 0 || connect(client[i], (struct sockaddr *)&address, sizeof address) != 0)
            fail("connect (raise ulimit -n for many clients)");
        relay[i] = accept(listener, NULL, NULL);
        if (relay[i] < 0) fail("accept");
        int one = 1;
        setsockopt(client[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(relay[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event event = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(epoll, EPOLL_CTL_ADD, relay[i], &event) != 0) fail("epoll_ctl");
    }
    uint8_t *view = calloc(1, view_bytes), *move = calloc(1, move_bytes), *buffer = malloc(65536);
    struct epoll_event *events = calloc((size_t)clients, sizeof *events);
    const int warmup = 10;
    /* The clients live in a child process, as the bots do: a write then
     * wakes a process that sleeps, as it does under a real relay. Each side
     * reports the CPU it used (user + system) over the timed ticks. */
    int report[2];
    if (pipe(report) != 0) fail("pipe");
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child == 0) {
        close(report[0]);
        double cpu_start = 0;
        for (int t = 0; t < ticks + warmup; t++) {
            if (t == warmup) cpu_start = cpu_seconds();
            for (int i = 0; i < clients; i++)
                if (write(client[i], move, move_bytes) != (ssize_t)move_bytes) _exit(1);
            for (int i = 0; i < clients; i++)
                if (read_all(client[i], buffer, view_bytes) != 0) _exit(1);
        }
        double used = cpu_seconds() - cpu_start;
        if (write(report[1], &used, sizeof used) != sizeof used) _exit(1);
        _exit(0);
    }
    close(report[1]);
    double cpu_start = 0;
    for (int t = 0; t < ticks + warmup; t++) {
        if (t == warmup) cpu_start = cpu_seconds();
        /* The relay waits, reads every move, answers every client. */
        int seen = 0;
        while (seen < clients) {
            int n = epoll_wait(epoll, events, clients, 5000);
            if (n <= 0) fail("epoll_wait");
            for (int k = 0; k < n; k++)
                if (read_all(relay[events[k].data.u32], buffer, move_bytes) != 0) fail("relay read");
            seen += n;
        }
        for (int i = 0; i < clients; i++)
            if (write(relay[i], view, view_bytes) != (ssize_t)view_bytes) fail("relay write");
    }
    double relay_cpu = cpu_seconds() - cpu_start, client_cpu = 0;
    if (read(report[0], &client_cpu, sizeof client_cpu) != sizeof client_cpu) fail("the client process");
    int status;
    waitpid(child, &status, 0);
    uint64_t relay_ns = (uint64_t)(relay_cpu * 1e9), client_ns = (uint64_t)(client_cpu * 1e9);
    double relay_us = (double)relay_ns / 1000.0 / ((double)clients * ticks);
    double client_us = (double)client_ns / 1000.0 / ((double)clients * ticks);
    if (json) {
        printf("{\"clients\":%d,\"ticks\":%d,\"view_bytes\":%zu,\"move_bytes\":%zu,"
               "\"relay_us_per_client_tick\":%.3f,\"client_us_per_client_tick\":%.3f}\n",
               clients, ticks, view_bytes, move_bytes, relay_us, client_us);
    } else {
        printf("bench-loopback: %d TCP connections on 127.0.0.1, %d ticks, %zu B down and %zu B up per client-tick\n",
               clients, ticks, view_bytes, move_bytes);
        printf("  relay side (epoll, read the move, write the view)   %6.2f us per client-tick\n", relay_us);
        printf("  client side (write the move, read the view)         %6.2f us per client-tick\n", client_us);
        printf("  (the floor under the baseapp and the bots rows of bench/loadtest.py)\n");
    }
    for (int i = 0; i < clients; i++) {
        close(relay[i]);
        close(client[i]);
    }
    close(listener);
    close(epoll);
    free(relay);
    free(client);
    free(view);
    free(move);
    free(buffer);
    free(events);
    return 0;
}
