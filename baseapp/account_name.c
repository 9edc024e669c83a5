/* account_name.c -- the account name rule (account_name.h). */
#include "account_name.h"

#include <string.h>

const char *account_name_check(const char *account) {
    size_t length = account ? strlen(account) : 0;
    if (length < 1 || length > ACCOUNT_NAME_MAX) return "must be 1 to 64 characters";
    for (size_t i = 0; i < length; i++) {
        char c = account[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                 c == '.';
        if (!ok) return "may only contain letters, digits, '_', '-' and '.'";
    }
    return NULL;
}
