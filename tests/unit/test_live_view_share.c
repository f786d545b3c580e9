/* Unit tests for the live view's admission rule (runtime/viewers,
 * live_view_refused): one more viewer is refused past a count or a screen
 * bytes share per session, per organization and on the server, and an
 * organization that already has viewers never takes the server's newcomer
 * reserve (core/share.h), so several organizations together cannot leave
 * none for one watching nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/limits.h"
#include "core/share.h"
#include "runtime/viewers.h"

#define MIB (1024LL * 1024)

struct vcase {
    const char *name;
    struct lv_held held;
    int refused;
    const char *says; /* a part of the reason, when refused */
};

/* A 1280x720 screen: 3.5 MiB a viewer. */
#define SMALL (1280LL * 720 * 4)

static const struct vcase cases[] = {
    {"an empty server admits", {0, 0, 0, 0, 0, 0, SMALL}, 0, NULL},
    {"a session at its count is refused",
     {LIM_LIVE_VIEWERS_SESSION, LIM_LIVE_VIEWERS_SESSION, LIM_LIVE_VIEWERS_SESSION, 0, 0, 0, SMALL},
     1,
     "this session"},
    {"an organization at its count is refused",
     {LIM_LIVE_VIEWERS_ORG, LIM_LIVE_VIEWERS_ORG, 0, 0, 0, 0, SMALL},
     1,
     "this organization"},
    {"an organization with viewers is refused at the reserve's edge of the count",
     {LIM_LIVE_VIEWERS - SHARE_RESERVE(LIM_LIVE_VIEWERS), 1, 0, 0, 0, 0, SMALL},
     1,
     "kept for organizations that have none"},
    {"an organization with none takes from the reserve",
     {LIM_LIVE_VIEWERS - SHARE_RESERVE(LIM_LIVE_VIEWERS), 0, 0, 0, 0, 0, SMALL},
     0,
     NULL},
    {"an organization with viewers is admitted one below the reserve",
     {LIM_LIVE_VIEWERS - SHARE_RESERVE(LIM_LIVE_VIEWERS) - 1, 1, 0, 0, 0, 0, SMALL},
     0,
     NULL},
    {"nobody passes the server's count, newcomer or not",
     {LIM_LIVE_VIEWERS, 0, 0, 0, 0, 0, SMALL},
     1,
     "the server"},
    {"a session's screen bytes past its share are refused",
     {1, 1, 1, 60 * MIB, 60 * MIB, 60 * MIB, 8 * MIB},
     1,
     "this session's"},
    {"an organization with viewers does not take the reserve's screen bytes",
     {40, 1, 0, LIM_LIVE_VIEW_BYTES - LIM_LIVE_VIEW_BYTES / LIM_SHARE_RESERVE_DIV - 4 * MIB,
      4 * MIB, 0, 8 * MIB},
     1,
     "kept for organizations that have no viewer"},
    {"an organization with none takes the reserve's screen bytes",
     {40, 0, 0, LIM_LIVE_VIEW_BYTES - LIM_LIVE_VIEW_BYTES / LIM_SHARE_RESERVE_DIV - 4 * MIB, 0, 0,
      8 * MIB},
     0,
     NULL},
    {"nobody passes the server's screen bytes",
     {40, 0, 0, LIM_LIVE_VIEW_BYTES - 4 * MIB, 0, 0, 8 * MIB},
     1,
     "the server's"},
};

static void live_view_admission_follows_the_shares_and_the_newcomer_reserve(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct vcase *c = &cases[i];
        char why[512] = "";
        int r = live_view_refused(&c->held, 1280, 720, why, sizeof why);
        if (r != c->refused || (c->says && !strstr(why, c->says)))
            fail_msg("%s: refused %d (want %d): %s", c->name, r, c->refused, why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(live_view_admission_follows_the_shares_and_the_newcomer_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
