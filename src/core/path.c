#include "core/path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Appends component [p, p+n) to out (length *len), handling "." and "..". */
static int push(char *out, size_t cap, size_t *len, const char *p, size_t n)
{
    if (n == 0 || (n == 1 && p[0] == '.'))
        return 0;
    if (n == 2 && p[0] == '.' && p[1] == '.') {
        while (*len > 1 && out[*len - 1] != '/')
            (*len)--;
        if (*len > 1)
            (*len)--; /* the slash before the removed component */
        out[*len] = '\0';
        return 0;
    }
    size_t need = *len + (*len > 1 ? 1 : 0) + n + 1;
    if (need > cap)
        return -ENAMETOOLONG;
    if (*len > 1)
        out[(*len)++] = '/';
    memcpy(out + *len, p, n);
    *len += n;
    out[*len] = '\0';
    return 0;
}

static int push_all(char *out, size_t cap, size_t *len, const char *s)
{
    while (*s) {
        while (*s == '/')
            s++;
        const char *end = strchr(s, '/');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        int rc = push(out, cap, len, s, n);
        if (rc)
            return rc;
        s += n;
    }
    return 0;
}

int path_absolute(const char *in, char *out, size_t cap)
{
    if (cap < 2)
        return -ENAMETOOLONG;
    out[0] = '\0';
    if (!in || !*in)
        return 0;
    out[0] = '/';
    out[1] = '\0';
    size_t len = 1;
    if (in[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return -errno;
        int rc = push_all(out, cap, &len, cwd);
        if (rc)
            return rc;
    }
    return push_all(out, cap, &len, in);
}

int path_program(const char *in, char *out, size_t cap)
{
    if (!in || !*in || strchr(in, '/'))
        return path_absolute(in, out, cap);
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t n = end ? (size_t)(end - path) : strlen(path);
        char cand[PATH_MAX];
        if (n > 0 && snprintf(cand, sizeof cand, "%.*s/%s", (int)n, path, in) < (int)sizeof cand &&
            access(cand, X_OK) == 0)
            return path_absolute(cand, out, cap);
        path += n;
        if (*path == ':')
            path++;
    }
    return -ENOENT;
}
