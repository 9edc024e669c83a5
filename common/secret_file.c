/* secret_file.c -- reads a secret from an owner-only file (secret_file.h).
 * It owns nothing past the call: the bytes read are wiped before it
 * returns. */
#include "secret_file.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

/* Reads all of fd into buffer (at most size bytes). Returns the length,
 * -1 with errno on a read error, or -2 when the file holds more. */
static ssize_t secret_file_read_all(int fd, char *buffer, size_t size) {
    size_t length = 0;
    for (;;) {
        ssize_t n = read(fd, buffer + length, size - length);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return (ssize_t)length;
        length += (size_t)n;
        if (length == size) return -2;
    }
}

/* Trims whitespace from both ends of [*start, end): moves *start past the
 * leading run and returns the length left. */
static size_t secret_file_trim(const char **start, const char *end) {
    while (*start < end && isspace((unsigned char)**start)) (*start)++;
    while (end > *start && isspace((unsigned char)end[-1])) end--;
    return (size_t)(end - *start);
}

int secret_file_read(const char *setting, const char *path, size_t min_length, char *out, size_t size, char *err,
                     size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s %s: %s", setting, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s %s is not a regular file", setting, path);
        close(fd);
        return -1;
    }
    if (st.st_mode & S_IROTH) {
        snprintf(err, errlen, "%s %s is readable by every user (mode %04o): chmod 600 (or 640) it", setting, path,
                 (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    /* Room for the longest secret and whitespace around it. */
    char buffer[SECRET_FILE_MAX + 64];
    ssize_t length = secret_file_read_all(fd, buffer, sizeof buffer);
    int read_errno = errno;
    close(fd);
    if (length == -1) {
        snprintf(err, errlen, "%s %s: %s", setting, path, strerror(read_errno));
        return -1;
    }
    if (length == -2) {
        snprintf(err, errlen, "%s %s holds more than a secret (over %d bytes)", setting, path, SECRET_FILE_MAX);
        sodium_memzero(buffer, sizeof buffer);
        return -1;
    }
    const char *start = buffer;
    size_t secret_length = secret_file_trim(&start, buffer + length);
    char problem[96] = "";
    if (secret_length == 0)
        snprintf(problem, sizeof problem, "is empty");
    else if (secret_length < min_length)
        snprintf(problem, sizeof problem, "holds a secret shorter than %zu characters", min_length);
    else if (secret_length > SECRET_FILE_MAX || secret_length + 1 > size)
        snprintf(problem, sizeof problem, "holds a secret longer than %d characters", SECRET_FILE_MAX);
    for (size_t i = 0; !problem[0] && i < secret_length; i++)
        if (start[i] < 0x21 || start[i] > 0x7e)
            snprintf(problem, sizeof problem, "holds a secret with a space or a non-printable byte");
    if (problem[0]) {
        snprintf(err, errlen, "%s %s %s", setting, path, problem);
        sodium_memzero(buffer, sizeof buffer);
        return -1;
    }
    memcpy(out, start, secret_length);
    out[secret_length] = '\0';
    sodium_memzero(buffer, sizeof buffer);
    return 0;
}
