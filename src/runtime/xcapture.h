/*
 * xcapture: screen pixels to PNG, for screenshots of headful sessions' X
 * displays (runtime/xinput.c grabs the pixels).
 *
 * Speed over size: its own deflate coder that looks only where screens
 * repeat (runs of one pixel, the row above), about 10x faster than zlib at
 * level 1 on a 1920x1080 browser screen, for files about twice as large
 * (figures in docs/computer.md). Pure; thread-safe.
 */
#ifndef BD_RUNTIME_XCAPTURE_H
#define BD_RUNTIME_XCAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

/* Encodes width x height pixels, 4 bytes each in B G R X order, stride bytes
 * per row, as an 8-bit RGB PNG: *png is owned (xmalloc'd), *len bytes.
 * E_INTERNAL when libpng fails. */
int xcapture_png(const uint8_t *bgrx, int width, int height, size_t stride, char **png, size_t *len,
                 struct err *e) WUR;

#endif
