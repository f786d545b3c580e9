/*
 * Files every node of a cluster must read (profile archives, extension
 * zips): on a shared store the store holds the bytes (store.h, blob_*),
 * keyed by the file's path under the data folder, and each node keeps the
 * file in its own data folder as a copy refreshed before every read. On
 * the embedded store these calls do nothing: the data folder is the truth.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "core/fdio.h"
#include "core/log.h"
#include "core/xalloc.h"

/* The key of path: its part under the data folder. */
static const char *key_of(const struct app *app, const char *path)
{
    size_t n = strlen(app->cfg.data_dir);
    if (strncmp(path, app->cfg.data_dir, n) == 0 && path[n] == '/')
        return path + n + 1;
    return path;
}

static int read_all(const char *path, void **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *buf = xmalloc(size ? size : 1);
    int err = fdio_read_all(fd, buf, size, &got, FDIO_NO_DEADLINE);
    close(fd);
    if (err || got != size) {
        xfree(buf);
        return err ? err : -EIO;
    }
    *out = buf;
    *len = size;
    return 0;
}

/* Writes data to path through a temporary file and a rename, so that a
 * reader never sees half a file. */
static int write_all(const char *path, const void *data, size_t len)
{
    char *tmp = xasprintf("%s.tmp.%ld", path, (long)gettid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd < 0 ? -errno : fdio_write_all(fd, data, len, FDIO_NO_DEADLINE);
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        (void)unlink(tmp);
    xfree(tmp);
    return rc;
}

int api_shared_put(struct app *app, const char *path)
{
    if (!store_shared(app->store))
        return 0;
    void *data = NULL;
    size_t len = 0;
    int rc = read_all(path, &data, &len);
    if (rc) {
        log_error("cluster: cannot read %s to share it: %s", path, strerror(-rc));
        return E_INTERNAL;
    }
    rc = store_blob_put(app->store, key_of(app, path), data, len);
    xfree(data);
    return rc;
}

int api_shared_get(const struct app *app, const char *path)
{
    if (!store_shared(app->store))
        return 0;
    void *data = NULL;
    size_t len = 0;
    int rc = store_blob_get(app->store, key_of(app, path), &data, &len);
    if (rc == E_NOTFOUND) {
        (void)unlink(path); /* a copy of something deleted meanwhile */
        return rc;
    }
    if (rc)
        return rc;
    char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        (void)mkdir(dir, 0700);
    }
    xfree(dir);
    int w = write_all(path, data, len);
    xfree(data);
    if (w) {
        log_error("cluster: cannot write the copy %s: %s", path, strerror(-w));
        return E_INTERNAL;
    }
    return 0;
}

int api_shared_delete(struct app *app, const char *path)
{
    return store_shared(app->store) ? store_blob_delete(app->store, key_of(app, path)) : 0;
}
