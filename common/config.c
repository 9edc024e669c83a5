/* config.c -- the loader that walks a program's config_key table: parsing
 * default and command-line text, reading the JSON file with cJSON, checking
 * types, bounds and string lengths, and printing the effective settings.
 *
 * It owns no settings of its own: values are written into the caller's
 * settings struct at each key's offset, and nothing is kept between calls.
 * What a setting *does* is the program's business; the table only says it.
 *
 * Layers, each overriding the one before: the table's default text, the
 * JSON file, the "key=value" overrides. Every error message starts with
 * "config <source>:" where source is the file path, "command line", or
 * "defaults table" (a bad default is a bug in the table), and names the key.
 */
#include "config.h"
#include "json_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG__SOURCE_DEFAULTS "defaults table"
#define CONFIG__SOURCE_COMMAND_LINE "command line"

/* Big enough for any number config__format_double prints (at most 17
 * significant digits, sign, point and exponent) with room to spare. */
#define CONFIG__NUMBER_TEXT 40

/* 2^63 as a double: int64_t holds exactly the doubles in [-2^63, 2^63). */
#define CONFIG__TWO_POW_63 9223372036854775808.0

static void config__error(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void config__error(char *err, size_t errlen, const char *fmt, ...) {
    if (err == NULL || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static char *config__field(void *settings, const config_key *key) { return (char *)settings + key->offset; }

/* Whole numbers below 1e15 print as plain integers (100, not 1e+02);
 * anything else as the shortest "%g" text that reads back as the same
 * double, so 0.1 prints as 0.1 and not 0.10000000000000001. */
static void config__format_double(double value, char *buf, size_t len) {
    if (value > -1e15 && value < 1e15 && (double)(int64_t)value == value) {
        snprintf(buf, len, "%" PRId64, (int64_t)value);
        return;
    }
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, len, "%.*g", precision, value);
        if (strtod(buf, NULL) == value) return;
    }
}

static const config_key *config__find(const config_key *keys, size_t key_count, const char *name, size_t name_len) {
    for (size_t i = 0; i < key_count; i++) {
        if (strlen(keys[i].name) == name_len && memcmp(keys[i].name, name, name_len) == 0) return &keys[i];
    }
    return NULL;
}

static const char *config__type_expected(config_type type) {
    switch (type) {
        case CONFIG_INT:
            return "an integer";
        case CONFIG_DOUBLE:
            return "a number";
        case CONFIG_BOOL:
            return "a boolean (true or false)";
        case CONFIG_STRING:
            return "a string";
        case CONFIG_GROUP:
            return "an object of numbers, strings and booleans";
    }
    return "a value";
}

static int config__store_int(const config_key *key, void *settings, int64_t value, const char *source, char *err,
                             size_t errlen) {
    if ((double)value < key->min || (double)value > key->max) {
        char lo[CONFIG__NUMBER_TEXT], hi[CONFIG__NUMBER_TEXT];
        config__format_double(key->min, lo, sizeof(lo));
        config__format_double(key->max, hi, sizeof(hi));
        config__error(err, errlen, "config %s: key '%s' = %" PRId64 " is out of bounds [%s, %s]", source, key->name,
                      value, lo, hi);
        return -1;
    }
    memcpy(config__field(settings, key), &value, sizeof(value));
    return 0;
}

static int config__store_double(const config_key *key, void *settings, double value, const char *source, char *err,
                                size_t errlen) {
    char text[CONFIG__NUMBER_TEXT];
    config__format_double(value, text, sizeof(text));
    if (!isfinite(value)) {
        config__error(err, errlen, "config %s: key '%s' must be a finite number, got %s", source, key->name, text);
        return -1;
    }
    if (value < key->min || value > key->max) {
        char lo[CONFIG__NUMBER_TEXT], hi[CONFIG__NUMBER_TEXT];
        config__format_double(key->min, lo, sizeof(lo));
        config__format_double(key->max, hi, sizeof(hi));
        config__error(err, errlen, "config %s: key '%s' = %s is out of bounds [%s, %s]", source, key->name, text, lo,
                      hi);
        return -1;
    }
    memcpy(config__field(settings, key), &value, sizeof(value));
    return 0;
}

static int config__store_string(const config_key *key, void *settings, const char *value, const char *source, char *err,
                                size_t errlen) {
    size_t len = strlen(value);
    if (len + 1 > key->size) {
        config__error(err, errlen, "config %s: key '%s' is too long (%zu bytes, at most %zu)", source, key->name, len,
                      key->size > 0 ? key->size - 1 : 0);
        return -1;
    }
    memcpy(config__field(settings, key), value, len + 1);
    return 0;
}

const char *config_group_find(const config_group *group, const char *name) {
    for (size_t i = 0; group && i < group->count; i++)
        if (strcmp(group->items[i].name, name) == 0) return group->items[i].value;
    return NULL;
}

/* Sets `name` in the group of `key` (replacing an earlier value). */
static int config__store_group_item(const config_key *key, void *settings, const char *name, size_t name_len,
                                    const char *value, const char *source, char *err, size_t errlen) {
    config_group *group = (config_group *)(void *)config__field(settings, key);
    if (name_len == 0 || name_len >= CONFIG_GROUP_NAME_MAX) {
        config__error(err, errlen, "config %s: key '%s.%.*s': the name must be 1 to %d bytes", source, key->name,
                      (int)name_len, name, CONFIG_GROUP_NAME_MAX - 1);
        return -1;
    }
    if (strlen(value) >= CONFIG_GROUP_VALUE_MAX) {
        config__error(err, errlen, "config %s: key '%s.%.*s' is too long (at most %d bytes)", source, key->name,
                      (int)name_len, name, CONFIG_GROUP_VALUE_MAX - 1);
        return -1;
    }
    struct config_group_item *item = NULL;
    for (size_t i = 0; i < group->count && !item; i++)
        if (strlen(group->items[i].name) == name_len && memcmp(group->items[i].name, name, name_len) == 0)
            item = &group->items[i];
    if (!item) {
        if (group->count == CONFIG_GROUP_MAX) {
            config__error(err, errlen, "config %s: key '%s' holds at most %d settings", source, key->name,
                          CONFIG_GROUP_MAX);
            return -1;
        }
        item = &group->items[group->count++];
        memcpy(item->name, name, name_len);
        item->name[name_len] = '\0';
    }
    snprintf(item->value, sizeof item->value, "%s", value);
    return 0;
}

/* Parses `text` (a default or the part of an override after '=') as the
 * key's type and stores it. Integers are decimal; booleans are exactly
 * "true", "false", "1" or "0"; strings are taken verbatim. */
static int config__apply_text(const config_key *key, void *settings, const char *text, const char *source, char *err,
                              size_t errlen) {
    char *end;
    switch (key->type) {
        case CONFIG_INT: {
            errno = 0;
            long long value = strtoll(text, &end, 10);
            if (end == text || *end != '\0' || (unsigned char)text[0] <= ' ') {
                config__error(err, errlen, "config %s: key '%s' must be an integer, got '%s'", source, key->name, text);
                return -1;
            }
            if (errno == ERANGE) {
                config__error(err, errlen, "config %s: key '%s' = %s does not fit in 64 bits", source, key->name, text);
                return -1;
            }
            return config__store_int(key, settings, (int64_t)value, source, err, errlen);
        }
        case CONFIG_DOUBLE: {
            errno = 0;
            double value = strtod(text, &end);
            if (end == text || *end != '\0' || (unsigned char)text[0] <= ' ') {
                config__error(err, errlen, "config %s: key '%s' must be a number, got '%s'", source, key->name, text);
                return -1;
            }
            return config__store_double(key, settings, value, source, err, errlen);
        }
        case CONFIG_BOOL: {
            bool value;
            if (strcmp(text, "true") == 0 || strcmp(text, "1") == 0) {
                value = true;
            } else if (strcmp(text, "false") == 0 || strcmp(text, "0") == 0) {
                value = false;
            } else {
                config__error(err, errlen, "config %s: key '%s' must be true, false, 1 or 0, got '%s'", source,
                              key->name, text);
                return -1;
            }
            memcpy(config__field(settings, key), &value, sizeof(value));
            return 0;
        }
        case CONFIG_STRING:
            return config__store_string(key, settings, text, source, err, errlen);
        case CONFIG_GROUP:
            /* A group starts empty; its items come by name. */
            memset(config__field(settings, key), 0, sizeof(config_group));
            return 0;
    }
    config__error(err, errlen, "config %s: key '%s' has an unknown type %d", source, key->name, (int)key->type);
    return -1;
}

/* Words for what a JSON value is, for "must be X, got Y" messages. */
static void config__describe_json(const cJSON *item, char *buf, size_t len) {
    if (cJSON_IsNumber(item)) {
        char text[CONFIG__NUMBER_TEXT];
        config__format_double(item->valuedouble, text, sizeof(text));
        snprintf(buf, len, "%s", text);
    } else if (cJSON_IsString(item)) {
        snprintf(buf, len, "a string");
    } else if (cJSON_IsBool(item)) {
        snprintf(buf, len, "%s", cJSON_IsTrue(item) ? "true" : "false");
    } else if (cJSON_IsNull(item)) {
        snprintf(buf, len, "null");
    } else if (cJSON_IsArray(item)) {
        snprintf(buf, len, "an array");
    } else if (cJSON_IsObject(item)) {
        snprintf(buf, len, "an object");
    } else {
        snprintf(buf, len, "an unknown JSON value");
    }
}

/* Checks one JSON value against the key's type and stores it. cJSON keeps
 * numbers as doubles, so integers beyond 2^53 arrive already rounded; a
 * number with a fraction is refused for an integer key. */
static int config__apply_json(const config_key *key, void *settings, const cJSON *item, const char *path, char *err,
                              size_t errlen) {
    bool ok;
    switch (key->type) {
        case CONFIG_INT:
            ok = cJSON_IsNumber(item) && item->valuedouble >= -CONFIG__TWO_POW_63 &&
                 item->valuedouble < CONFIG__TWO_POW_63 && (double)(int64_t)item->valuedouble == item->valuedouble;
            break;
        case CONFIG_DOUBLE:
            ok = cJSON_IsNumber(item);
            break;
        case CONFIG_BOOL:
            ok = cJSON_IsBool(item);
            break;
        case CONFIG_STRING:
            ok = cJSON_IsString(item) && item->valuestring != NULL;
            break;
        case CONFIG_GROUP:
            ok = cJSON_IsObject(item);
            for (const cJSON *member = ok ? item->child : NULL; member != NULL; member = member->next)
                if (!cJSON_IsNumber(member) && !cJSON_IsBool(member) && !cJSON_IsString(member)) ok = false;
            break;
        default:
            ok = false;
            break;
    }
    if (!ok) {
        char got[CONFIG__NUMBER_TEXT + 16];
        config__describe_json(item, got, sizeof(got));
        config__error(err, errlen, "config %s: key '%s' must be %s, got %s", path, key->name,
                      config__type_expected(key->type), got);
        return -1;
    }
    switch (key->type) {
        case CONFIG_INT:
            return config__store_int(key, settings, (int64_t)item->valuedouble, path, err, errlen);
        case CONFIG_DOUBLE:
            return config__store_double(key, settings, item->valuedouble, path, err, errlen);
        case CONFIG_BOOL: {
            bool value = cJSON_IsTrue(item);
            memcpy(config__field(settings, key), &value, sizeof(value));
            return 0;
        }
        case CONFIG_STRING:
            return config__store_string(key, settings, item->valuestring, path, err, errlen);
        case CONFIG_GROUP:
            for (const cJSON *member = item->child; member != NULL; member = member->next) {
                char text[CONFIG__NUMBER_TEXT];
                const char *value = text;
                if (cJSON_IsNumber(member))
                    config__format_double(member->valuedouble, text, sizeof(text));
                else if (cJSON_IsBool(member))
                    snprintf(text, sizeof text, "%s", cJSON_IsTrue(member) ? "true" : "false");
                else
                    value = member->valuestring;
                const char *name = member->string ? member->string : "";
                if (config__store_group_item(key, settings, name, strlen(name), value, path, err, errlen) != 0)
                    return -1;
            }
            return 0;
    }
    return -1;
}

/* Applies the JSON file at `path`: a flat object whose names are keys. */
static int config__load_file(const config_key *keys, size_t key_count, void *settings, const char *path, char *err,
                             size_t errlen) {
    size_t len;
    char problem[192];
    char *text = json_file_read(path, &len, problem, sizeof problem);
    if (text == NULL) {
        config__error(err, errlen, "config %s: %s", path, problem);
        return -1;
    }
    cJSON *root = json_file_parse(text, len, problem, sizeof problem);
    if (root == NULL) {
        config__error(err, errlen, "config %s: %s", path, problem);
        free(text);
        return -1;
    }
    free(text);
    if (!cJSON_IsObject(root)) {
        config__error(err, errlen, "config %s: top level must be a JSON object", path);
        cJSON_Delete(root);
        return -1;
    }
    int rc = 0;
    for (const cJSON *item = root->child; item != NULL && rc == 0; item = item->next) {
        const char *name = item->string != NULL ? item->string : "";
        const config_key *key = config__find(keys, key_count, name, strlen(name));
        if (key == NULL) {
            config__error(err, errlen, "config %s: unknown key '%s'", path, name);
            rc = -1;
            break;
        }
        rc = config__apply_json(key, settings, item, path, err, errlen);
    }
    cJSON_Delete(root);
    return rc;
}

/* On failure `settings` may be partly filled: the caller should report the
 * error and stop rather than run with it. */
int config_load(const config_key *keys, size_t key_count, void *settings, const char *path, char *const *overrides,
                size_t override_count, char *err, size_t errlen) {
    if (err != NULL && errlen > 0) err[0] = '\0';
    if ((keys == NULL && key_count > 0) || settings == NULL || (overrides == NULL && override_count > 0)) {
        config__error(err, errlen, "config: bad arguments");
        return -1;
    }
    for (size_t i = 0; i < key_count; i++) {
        const config_key *key = &keys[i];
        if (key->default_value == NULL) {
            /* No default text: the zero value, unchecked against bounds. */
            switch (key->type) {
                case CONFIG_INT:
                    memset(config__field(settings, key), 0, sizeof(int64_t));
                    break;
                case CONFIG_DOUBLE: {
                    double zero = 0.0;
                    memcpy(config__field(settings, key), &zero, sizeof(zero));
                    break;
                }
                case CONFIG_BOOL:
                    memset(config__field(settings, key), 0, sizeof(bool));
                    break;
                case CONFIG_STRING:
                    if (key->size > 0) config__field(settings, key)[0] = '\0';
                    break;
                case CONFIG_GROUP:
                    memset(config__field(settings, key), 0, sizeof(config_group));
                    break;
            }
            continue;
        }
        if (config__apply_text(key, settings, key->default_value, CONFIG__SOURCE_DEFAULTS, err, errlen) != 0) return -1;
    }
    if (path != NULL && config__load_file(keys, key_count, settings, path, err, errlen) != 0) return -1;
    for (size_t i = 0; i < override_count; i++) {
        const char *arg = overrides[i];
        if (arg == NULL) continue;
        const char *eq = strchr(arg, '=');
        if (eq == NULL) {
            config__error(err, errlen, "config %s: override '%s' is not key=value", CONFIG__SOURCE_COMMAND_LINE, arg);
            return -1;
        }
        const config_key *key = config__find(keys, key_count, arg, (size_t)(eq - arg));
        const char *dot = memchr(arg, '.', (size_t)(eq - arg));
        if (key == NULL && dot != NULL) {
            /* "group.name=value" */
            const config_key *group = config__find(keys, key_count, arg, (size_t)(dot - arg));
            if (group != NULL && group->type == CONFIG_GROUP) {
                if (config__store_group_item(group, settings, dot + 1, (size_t)(eq - dot - 1), eq + 1,
                                             CONFIG__SOURCE_COMMAND_LINE, err, errlen) != 0)
                    return -1;
                continue;
            }
        }
        if (key == NULL) {
            config__error(err, errlen, "config %s: unknown key '%.*s'", CONFIG__SOURCE_COMMAND_LINE, (int)(eq - arg),
                          arg);
            return -1;
        }
        if (config__apply_text(key, settings, eq + 1, CONFIG__SOURCE_COMMAND_LINE, err, errlen) != 0) return -1;
    }
    return 0;
}

/* Strings are printed in double quotes with ", \ and control bytes escaped,
 * so an empty or space-padded value is visible in a log. */
static void config__print_string(FILE *out, const char *s, size_t size) {
    fputc('"', out);
    for (size_t i = 0; i < size && s[i] != '\0'; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

void config_print(const config_key *keys, size_t key_count, const void *settings, void *out) {
    FILE *f = out;
    if (keys == NULL || settings == NULL || f == NULL) return;
    for (size_t i = 0; i < key_count; i++) {
        const config_key *key = &keys[i];
        const char *field = (const char *)settings + key->offset;
        fprintf(f, "%s = ", key->name);
        switch (key->type) {
            case CONFIG_INT: {
                int64_t value;
                memcpy(&value, field, sizeof(value));
                fprintf(f, "%" PRId64, value);
                break;
            }
            case CONFIG_DOUBLE: {
                double value;
                char text[CONFIG__NUMBER_TEXT];
                memcpy(&value, field, sizeof(value));
                config__format_double(value, text, sizeof(text));
                fputs(text, f);
                break;
            }
            case CONFIG_BOOL: {
                bool value;
                memcpy(&value, field, sizeof(value));
                fputs(value ? "true" : "false", f);
                break;
            }
            case CONFIG_STRING:
                config__print_string(f, field, key->size);
                break;
            case CONFIG_GROUP: {
                const config_group *group = (const config_group *)(const void *)field;
                fputc('{', f);
                for (size_t k = 0; k < group->count; k++)
                    fprintf(f, "%s%s: %s", k ? ", " : "", group->items[k].name, group->items[k].value);
                fputc('}', f);
                break;
            }
        }
        if (key->help != NULL && key->help[0] != '\0') fprintf(f, "  # %s", key->help);
        fputc('\n', f);
    }
}
