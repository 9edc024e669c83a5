/* account_name.h -- what an account name may be: 1 to 64 letters, digits,
 * '_', '-' and '.', so that it is safe as a Redis key part, in a log line
 * and in a URL. Checked before anything is looked up for it. */
#ifndef TESSERA_ACCOUNT_NAME_H
#define TESSERA_ACCOUNT_NAME_H

/* The longest account name. */
#define ACCOUNT_NAME_MAX 64

/* NULL when `account` is acceptable, or why it is not. */
const char *account_name_check(const char *account);

#endif
