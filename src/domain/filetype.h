/*
 * filetype: what a downloaded file is, for the downloads listing
 * (api/fs.c, docs/fs.md). Pure; no I/O.
 */
#ifndef BD_DOMAIN_FILETYPE_H
#define BD_DOMAIN_FILETYPE_H

#include <stddef.h>
#include <stdint.h>

/* How many leading bytes filetype_mime looks at. */
#define FILETYPE_HEAD_BYTES 16

/* The media type of a file named name whose first n bytes are head (n may
 * be less than FILETYPE_HEAD_BYTES): its signature first (PDF, PNG, JPEG,
 * GIF, WebP, ZIP, gzip), since downloads named by the browser
 * (Browser.setDownloadBehavior allowAndName) have no extension, then its
 * extension (any case), else "application/octet-stream". A static string. */
const char *filetype_mime(const char *name, const uint8_t *head, size_t n);

/* 1 when name is a download still being written by Chromium (it ends in
 * ".crdownload": the browser renames the file when it is complete). */
int filetype_partial(const char *name);

#endif
