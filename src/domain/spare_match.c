#include "domain/spare_match.h"

#include <string.h>

/* A launch-affecting field is "as launched" when it equals what spare_kind_body
 * produces after sessrules_validate_create: the defaults of the interface
 * document. Each check names its field; the order is the order the header
 * lists, so the reported field is stable. */
enum spare_kind spare_match(const struct sessrules_create *c, const char **field)
{
    struct viewport dflt;
    viewport_default(0, &dflt);
    const char *why = NULL;
    if (c->stealth)
        why = "stealth"; /* command-line flags and the egress default */
    else if (c->kiosk_mode)
        why = "kiosk_mode";
    else if (c->gpu)
        why = "gpu";
    else if (strcmp(c->memory, SESSRULES_MEMORY_DEFAULT) != 0)
        why = "memory"; /* the sandbox's cgroup limit, set at creation */
    else if (!c->headless &&
             (c->viewport.width != dflt.width || c->viewport.height != dflt.height ||
              c->viewport.refresh_rate != dflt.refresh_rate))
        why = "viewport"; /* headful: the Xvfb screen's size (a headless page is sized at
                             hand-out, as at launch: chromium_fit_headless) */
    else if (c->profile)
        why = "profile"; /* the profile folder is filled before launch */
    /* proxy and network are not here: the spare's egress listener is given
     * its owner's selection and rules at hand-out (egress_rekey). */
    else if (c->telemetry_destination)
        why = "telemetry.export"; /* resolved in the org's store at prepare */
    else if (c->chrome_policy && json_object_size(c->chrome_policy) > 0)
        why = "chrome_policy";
    else if (c->extensions && json_array_size(c->extensions) > 0)
        why = "extensions";
    else if (c->vaults && json_array_size(c->vaults) > 0)
        why = "vaults";
    if (field)
        *field = why;
    if (why)
        return SPARE_NONE;
    return c->headless ? SPARE_HEADLESS : SPARE_HEADFUL;
}

const char *spare_kind_body(enum spare_kind k)
{
    return k == SPARE_HEADLESS ? "{\"headless\":true}" : "{}";
}

const char *spare_kind_name(enum spare_kind k)
{
    return k == SPARE_HEADLESS ? "headless" : k == SPARE_HEADFUL ? "headful" : "none";
}
