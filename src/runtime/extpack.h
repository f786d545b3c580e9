/*
 * extpack: browser extension archives, checked before they are stored and
 * unpacked into a session's files (libarchive, zip only).
 *
 * An extension archive is a zip of an UNPACKED extension: manifest.json at
 * its top, manifest_version 2 or 3. Everything in it is untrusted: entry
 * names are checked as names (no absolute paths, no "..", no backslashes),
 * only regular files and folders are accepted (a symlink or hard link entry
 * refuses the archive), and entry count, per-archive unpacked bytes and the
 * manifest's size are capped (core/limits.h). Unpacking writes beneath a
 * folder descriptor only, one component at a time with O_NOFOLLOW, so even
 * a tree another user can write into cannot redirect a write elsewhere.
 *
 * CRX files (the Chrome Web Store's packaging) are a header and a zip:
 * extpack_crx_payload finds the zip.
 *
 * Every function is thread-safe (no shared state).
 */
#ifndef BD_RUNTIME_EXTPACK_H
#define BD_RUNTIME_EXTPACK_H

#include <stddef.h>

#include "core/err.h"

/* What extpack_check learnt of an archive. */
struct extpack_info {
    int manifest_version;              /* 2 or 3 */
    char name[256];                    /* manifest "name" ("" when absent or not a string) */
    char version[64];                  /* manifest "version" ("" when absent) */
    size_t entries;                    /* entries in the archive */
    unsigned long long unpacked_bytes; /* sum of the files' sizes */
};

/* 0 when path is an acceptable entry name of an extension archive: relative,
 * '/'-separated, no "." or ".." component, no empty component except a
 * trailing '/' (a folder), no backslash or control character, at most
 * 1024 bytes, components at most 255 bytes, at most 32 levels. Otherwise
 * E_INVALID with why (cap bytes) naming the rule. Pure. */
int extpack_path_check(const char *path, char *why, size_t cap) WUR;

/* Checks that the len bytes at zip are an extension archive (the rules
 * above, and every file's data decompresses with a good checksum). Fills
 * info (may be NULL). E_INVALID with a message naming the reason: not a
 * zip, a bad entry (named), too many entries or bytes, no manifest.json at
 * the top, a manifest that is not a JSON object, a manifest_version other
 * than 2 or 3. */
int extpack_check(const void *zip, size_t len, struct extpack_info *info, struct err *e) WUR;

/* Unpacks the archive (already accepted by extpack_check) beneath the
 * folder open at dirfd: folders mode 0755, files 0644, owned by the caller
 * (the process's umask does not apply). Refuses to write through symlinks
 * and over existing files. E_INVALID for an archive that breaks a rule,
 * E_INTERNAL for a write failure (a full disk: the message says which). */
int extpack_unpack(const void *zip, size_t len, int dirfd, struct err *e) WUR;

/* The zip inside a CRX file (versions 2 and 3: "Cr24", version, then the
 * header lengths and the header): *off receives the payload's offset. E_INVALID
 * with the reason when the bytes are not a CRX or the header runs past the
 * end. Pure; safe on any input (fuzz/fuzz_crx.c). */
int extpack_crx_payload(const void *crx, size_t len, size_t *off, struct err *e) WUR;

#endif
