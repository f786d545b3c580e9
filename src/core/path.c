#include "core/path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/xalloc.h"

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

ssize_t path_read_small(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

void path_remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *child = xasprintf("%s/%s", path, de->d_name);
        struct stat st;
        if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
            path_remove_tree(child);
        else
            unlink(child);
        xfree(child);
    }
    closedir(d);
    rmdir(path);
}
