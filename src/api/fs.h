/* api/fs: browser filesystem (browsers.fs.*, SESSION_API.md section 2): the
 * session's own files (/tmp and /home inside its sandbox) through
 * runtime/sessfs; docs/fs.md. Every call needs the org's file_io feature
 * (403) and a sandboxed session (503 sandbox_required). */
#ifndef BD_API_FS_H
#define BD_API_FS_H

#include "api/api.h"
#include "http/http.h"

int fs_read_file(struct req *rq, struct resp *rs);
int fs_write_file(struct req *rq, struct resp *rs);
int fs_list_files(struct req *rq, struct resp *rs);
int fs_file_info(struct req *rq, struct resp *rs);
int fs_create_directory(struct req *rq, struct resp *rs);
int fs_delete_file(struct req *rq, struct resp *rs);
int fs_delete_directory(struct req *rq, struct resp *rs);
int fs_move(struct req *rq, struct resp *rs);
int fs_set_file_permissions(struct req *rq, struct resp *rs);
int fs_download_dir_zip(struct req *rq, struct resp *rs);
/* GET /browsers/{id}/fs/downloads (not in the official client; docs/fs.md):
 * the files the session's browser downloaded, {directory, downloads: [{name,
 * path, size, type, sha256, complete, mod_time}]}. */
int fs_downloads(struct req *rq, struct resp *rs);
int fs_upload(struct req *rq, struct resp *rs);
int fs_upload_zip(struct req *rq, struct resp *rs);
/* Watches live until stopped or until their session ends (noticed within a
 * second by the module's ticker thread, started with the first watch). */
int fs_watch_start(struct req *rq, struct resp *rs);
int fs_watch_events(struct req *rq, struct resp *rs);
int fs_watch_stop(struct req *rq, struct resp *rs);

/* The routes of this module, spliced into api_routes (routes.c). */
#define FS_ROUTES                                                                                  \
    {"GET", "/browsers/{id}/fs/read_file", fs_read_file, AUTH_KEY},                                \
        {"PUT", "/browsers/{id}/fs/write_file", fs_write_file,                                     \
         AUTH_KEY | HTTP_ROUTE_UPLOAD | HTTP_ROUTE_BLOCKING | HTTP_ROUTE_STREAM},                  \
        {"GET", "/browsers/{id}/fs/list_files", fs_list_files, AUTH_KEY | HTTP_ROUTE_BLOCKING},    \
        {"GET", "/browsers/{id}/fs/file_info", fs_file_info, AUTH_KEY},                            \
        {"PUT", "/browsers/{id}/fs/create_directory", fs_create_directory, AUTH_KEY},              \
        {"PUT", "/browsers/{id}/fs/delete_file", fs_delete_file, AUTH_KEY},                        \
        {"PUT", "/browsers/{id}/fs/delete_directory", fs_delete_directory,                         \
         AUTH_KEY | HTTP_ROUTE_BLOCKING},                                                          \
        {"PUT", "/browsers/{id}/fs/move", fs_move, AUTH_KEY},                                      \
        {"PUT", "/browsers/{id}/fs/set_file_permissions", fs_set_file_permissions, AUTH_KEY},      \
        {"GET", "/browsers/{id}/fs/download_dir_zip", fs_download_dir_zip, AUTH_KEY},              \
        {"GET", "/browsers/{id}/fs/downloads", fs_downloads, AUTH_KEY | HTTP_ROUTE_BLOCKING},      \
        {"POST", "/browsers/{id}/fs/upload", fs_upload,                                            \
         AUTH_KEY | HTTP_ROUTE_UPLOAD | HTTP_ROUTE_BLOCKING | HTTP_ROUTE_STREAM},                  \
        {"POST", "/browsers/{id}/fs/upload_zip", fs_upload_zip,                                    \
         AUTH_KEY | HTTP_ROUTE_UPLOAD | HTTP_ROUTE_BLOCKING},                                      \
        {"POST", "/browsers/{id}/fs/watch", fs_watch_start, AUTH_KEY},                             \
        {"GET", "/browsers/{id}/fs/watch/{watch_id}/events", fs_watch_events, AUTH_KEY},           \
        {"DELETE", "/browsers/{id}/fs/watch/{watch_id}", fs_watch_stop, AUTH_KEY},

#endif
