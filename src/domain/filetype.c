#include "domain/filetype.h"

#include <string.h>
#include <strings.h>

#define PARTIAL_SUFFIX ".crdownload"

static const struct {
    const char *magic;
    size_t off, len;
    const char *mime;
} signatures[] = {
    {"%PDF-", 0, 5, "application/pdf"},      {"\x89PNG\r\n\x1a\n", 0, 8, "image/png"},
    {"\xff\xd8\xff", 0, 3, "image/jpeg"},    {"GIF87a", 0, 6, "image/gif"},
    {"GIF89a", 0, 6, "image/gif"},           {"WEBP", 8, 4, "image/webp"},
    {"PK\x03\x04", 0, 4, "application/zip"}, {"\x1f\x8b", 0, 2, "application/gzip"},
};

static const struct {
    const char *ext, *mime;
} extensions[] = {
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"svg", "image/svg+xml"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"csv", "text/csv"},
    {"txt", "text/plain"},
    {"json", "application/json"},
    {"html", "text/html"},
    {"htm", "text/html"},
    {"xml", "application/xml"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
    {"docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
};

int filetype_partial(const char *name)
{
    size_t n = strlen(name), k = strlen(PARTIAL_SUFFIX);
    return n > k && strcmp(name + n - k, PARTIAL_SUFFIX) == 0;
}

const char *filetype_mime(const char *name, const uint8_t *head, size_t n)
{
    const char *dot = strrchr(name, '.');
    const char *ext = dot && dot != name ? dot + 1 : NULL;
    /* An extension that names a container of its own (xlsx and docx are
     * zips) wins over the zip signature. */
    for (size_t i = 0; ext && i < sizeof extensions / sizeof *extensions; i++)
        if (strcasecmp(ext, extensions[i].ext) == 0 &&
            strncmp(extensions[i].mime, "application/vnd.", 16) == 0)
            return extensions[i].mime;
    for (size_t i = 0; i < sizeof signatures / sizeof *signatures; i++)
        if (n >= signatures[i].off + signatures[i].len &&
            memcmp(head + signatures[i].off, signatures[i].magic, signatures[i].len) == 0)
            return signatures[i].mime;
    for (size_t i = 0; ext && i < sizeof extensions / sizeof *extensions; i++)
        if (strcasecmp(ext, extensions[i].ext) == 0)
            return extensions[i].mime;
    return "application/octet-stream";
}
