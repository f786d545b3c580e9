#include "runtime/xcapture.h"

#include <png.h>
#include <setjmp.h>
#include <string.h>
#include <zlib.h>

#include "core/xalloc.h"

/* The PNG being written, grown as libpng hands over bytes. */
struct out {
    char *buf;
    size_t len, cap;
};

static void out_write(png_structp p, png_bytep data, png_size_t n)
{
    struct out *o = png_get_io_ptr(p);
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 1 << 16;
        while (cap < o->len + n)
            cap *= 2;
        o->buf = xrealloc(o->buf, cap);
        o->cap = cap;
    }
    memcpy(o->buf + o->len, data, n);
    o->len += n;
}

static void out_flush(png_structp p)
{
    (void)p;
}

int xcapture_png(const uint8_t *bgrx, int width, int height, size_t stride, char **png,
                 size_t *len, struct err *e)
{
    *png = NULL;
    *len = 0;
    if (width < 1 || height < 1 || stride < (size_t)width * 4)
        return err_set(e, E_INTERNAL, "internal", "a capture of %dx%d is not encodable", width,
                       height);
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = p ? png_create_info_struct(p) : NULL;
    /* volatile: read after libpng's longjmp. */
    struct out *volatile o = xcalloc(1, sizeof *o);
    if (!p || !info || setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        xfree(o->buf);
        xfree(o);
        return err_set(e, E_INTERNAL, "internal", "failed to encode the screenshot as PNG");
    }
    png_set_write_fn(p, o, out_write, out_flush);
    png_set_compression_level(p, 1);
    png_set_compression_strategy(p, Z_DEFAULT_STRATEGY);
    png_set_filter(p, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
    png_set_IHDR(p, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE, PNG_FILTER_TYPE_BASE);
    png_write_info(p, info);
    /* The rows as they are: libpng drops the 4th byte and swaps B and R. */
    png_set_filler(p, 0, PNG_FILLER_AFTER);
    png_set_bgr(p);
    for (int y = 0; y < height; y++)
        png_write_row(p, (png_const_bytep)(bgrx + (size_t)y * stride));
    png_write_end(p, NULL);
    png_destroy_write_struct(&p, &info);
    *png = o->buf;
    *len = o->len;
    xfree(o);
    return 0;
}
