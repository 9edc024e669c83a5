/* secret_file.h -- reading a secret (a token, a password) from a file that
 * only its owner and group can read, so that it never appears on a command
 * line, in a config file or in the environment of a process listing.
 *
 * Used for admin_token_file (admin_guard.h) and redis_password_file
 * (process.h). */
#ifndef TESSERA_SECRET_FILE_H
#define TESSERA_SECRET_FILE_H

#include <stddef.h>

/* The longest secret a file may hold. */
#define SECRET_FILE_MAX 256

/* Reads the secret in `path` into out (NUL-terminated; size must be at
 * least SECRET_FILE_MAX + 1 or the secret's length + 1), with leading and
 * trailing whitespace trimmed. `setting` names the setting that gave the
 * path, for the error. Refuses, returning -1 with the reason in err (which
 * never holds the secret), a file that cannot be read or is not a regular
 * file, one every user may read (its mode grants "other" read: chmod 600 or
 * 640 it), and a secret that is empty, shorter than min_length, longer than
 * SECRET_FILE_MAX, or holds anything but printable ASCII without spaces. */
int secret_file_read(const char *setting, const char *path, size_t min_length, char *out, size_t size, char *err,
                     size_t errlen);

#endif
