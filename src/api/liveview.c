/*
 * Live view: the page, the token, the WebSocket's upgrade and the record's
 * browser_live_view_url. The viewers themselves (one thread each, pictures
 * down, input up) are the app's engine app->viewers (runtime/viewers.h).
 * docs/live-view.md has the figures.
 */
#include "api/liveview.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "session/ext.h"
#include "core/jsonx.h"
#include "core/xalloc.h"
#include "domain/launch_settings.h"
#include "domain/replay_rules.h"
#include "proxy/ws.h"
#include "runtime/sessmgr.h"
#include "runtime/viewers.h"

static void lv_close(void *ctx)
{
    http_upgrade_close(ctx);
}

static void lv_upgraded(void *ctx, int fd, const char *extra, size_t extra_len,
                        struct http_upgrade *up)
{
    viewer_run(ctx, fd, extra, extra_len, lv_close, up);
}

static void lv_cancel(void *ctx)
{
    viewer_cancel(ctx);
}

/* The token's session when it is live and headful; 404 otherwise (an ended
 * session's URL is dead). */
static int open_token(struct req *rq, char *org, char *sid)
{
    struct app *app = api_app(rq);
    if (liveview_token_parse(app->token_key, sizeof app->token_key, rq->params[0], org, STORE_ID,
                             sid, STORE_ID) != 0)
        return err_set(&rq->err, E_NOTFOUND, "not_found", "no live view at this address");
    struct live *l = sessmgr_get(app->sessions, sid);
    char ws[512];
    int alive = l && live_ws_url(l, ws, sizeof ws) == 0;
    sessmgr_put(l);
    if (!alive)
        return err_set(&rq->err, E_NOTFOUND, "not_found",
                       "browser session %s has ended: its live view is gone", sid);
    return 0;
}

/* A live view of a session another node runs is served by that node. */
static int lv_forward(struct req *rq, struct resp *rs, int upgrade)
{
    struct app *app = api_app(rq);
    char org[STORE_ID], sid[STORE_ID];
    if (liveview_token_parse(app->token_key, sizeof app->token_key, rq->params[0], org, STORE_ID,
                             sid, STORE_ID) != 0)
        return -1;
    struct live *l = sessmgr_get(app->sessions, sid);
    int here = l != NULL;
    sessmgr_put(l);
    return here ? -1 : api_cluster_forward(rq, rs, org, sid, upgrade);
}

int liveview_ws(struct req *rq, struct resp *rs)
{
    char org[STORE_ID], sid[STORE_ID];
    int rc = lv_forward(rq, rs, 1);
    if (rc != -1)
        return rc;
    rc = open_token(rq, org, sid);
    if (rc)
        return rc;
    const char *key = req_header(rq, "Sec-WebSocket-Key");
    const char *upg = req_header(rq, "Upgrade");
    char accept[29];
    if (!upg || strcasecmp(upg, "websocket") != 0 || !key || ws_accept_key(key, accept) != 0)
        return err_set(&rq->err, E_INVALID, "bad_request",
                       "this endpoint speaks WebSocket: send Upgrade: websocket with a "
                       "Sec-WebSocket-Key");
    struct app *app = api_app(rq);
    const char *ro = req_query(rq, "readOnly");
    if (!ro)
        ro = req_query(rq, "readonly");
    if (!ro)
        ro = req_query(rq, "ro");
    int read_only =
        ro && (strcmp(ro, "1") == 0 || strcasecmp(ro, "true") == 0 || strcasecmp(ro, "yes") == 0);
    struct viewer *v =
        viewer_new(app->viewers, app->sessions, app->store, sid, org, read_only, &rq->err);
    if (!v)
        return E_INTERNAL;
    char why[300];
    if (viewer_refused(v, why, sizeof why)) {
        viewer_cancel(v);
        rq->err.retry_after = 5;
        return err_set(&rq->err, E_LIMIT, "rate_limited", "%s (%s)", why,
                       "close a viewer, then connect again");
    }
    resp_upgrade(rs, accept, lv_upgraded, lv_cancel, v);
    return 0;
}

/* The page: a canvas scaled to the window (letterboxed), pictures drawn as
 * they come, input sent unless read-only. Embeddable in an iframe. */
static const char page_html[] =
    "<!doctype html><html><head><meta charset=utf-8><title>live view</title>"
    "<meta name=viewport content='width=device-width,initial-scale=1'>"
    "<style>html,body{margin:0;height:100%;background:#111;overflow:hidden}"
    "canvas{width:100%;height:100%;object-fit:contain;display:block;outline:none}"
    "#s{position:fixed;top:4px;left:6px;color:#aaa;font:12px sans-serif}</style></head>"
    "<body><canvas id=c tabindex=0></canvas><div id=s>connecting</div><script>\n"
    "'use strict';\n"
    "const q=new URLSearchParams(location.search);\n"
    "const ro=/^(1|true|yes)$/i.test(q.get('readOnly')||q.get('readonly')||q.get('ro')||'');\n"
    "const c=document.getElementById('c'),g=c.getContext('2d'),st=document.getElementById('s');\n"
    "const u=new URL(location.href);u.protocol=u.protocol==='https:'?'wss:':'ws:';\n"
    "u.pathname=u.pathname.replace(/\\/$/,'')+'/ws';u.search=ro?'?readOnly=true':'';u.hash='';\n"
    "const ws=new WebSocket(u);ws.binaryType='blob';window.lvFrames=0;let busy=false;\n"
    "ws.onopen=()=>{st.textContent=ro?'view only':'';try{parent.postMessage({type:'KERNEL_"
    "CONNECTED',connected:true},'*')}catch(e){}};\n"
    "ws.onclose=()=>{st.textContent='disconnected'};\n"
    "ws.onmessage=async(m)=>{if(typeof m.data==='string'){try{const j=JSON.parse(m.data);\n"
    " if(j.type==='clipboard'){window.lvClipboard=j.text;navigator.clipboard&&navigator."
    "clipboard.writeText(j.text).catch(()=>{})}}catch(e){}return}\n"
    " if(busy)return;busy=true;\n"
    " try{const b=await createImageBitmap(m.data);if(c.width!==b.width||c.height!==b.height)"
    "{c.width=b.width;c.height=b.height}\n"
    " g.drawImage(b,0,0);b.close();window.lvFrames++}catch(e){}busy=false};\n"
    "function pos(e){const r=c.getBoundingClientRect(),k=Math.min(r.width/c.width,r.height/"
    "c.height);\n"
    " const x=(e.clientX-r.left-(r.width-c.width*k)/2)/k,y=(e.clientY-r.top-(r.height-c.height*"
    "k)/2)/k;\n"
    " return[Math.max(0,Math.min(c.width-1,Math.round(x))),Math.max(0,Math.min(c.height-1,"
    "Math.round(y)))]}\n"
    "function send(action,body){if(!ro&&ws.readyState===1)ws.send(JSON.stringify({action,body}))"
    "}\n"
    "const B=['left','middle','right'];let down=null;\n"
    "c.addEventListener('mousedown',e=>{c.focus();down=pos(e);e.preventDefault()});\n"
    "c.addEventListener('mouseup',e=>{if(!down)return;const p=pos(e);\n"
    " if(Math.abs(p[0]-down[0])+Math.abs(p[1]-down[1])<4)send('click_mouse',{x:p[0],y:p[1],"
    "button:B[e.button]||'left'});\n"
    " else send('drag_mouse',{path:[down,p]});down=null});\n"
    "c.addEventListener('contextmenu',e=>e.preventDefault());\n"
    "c.addEventListener('wheel',e=>{const p=pos(e);send('scroll',{x:p[0],y:p[1],delta_x:Math."
    "sign(e.deltaX)*Math.max(1,Math.round(Math.abs(e.deltaX)/100)),delta_y:Math.sign(e.deltaY)"
    "*Math.max(1,Math.round(Math.abs(e.deltaY)/100))});e.preventDefault()},{passive:false});\n"
    "const K={Enter:'Return',Backspace:'BackSpace',Tab:'Tab',Escape:'Escape',Delete:'Delete',"
    "ArrowLeft:'Left',ArrowRight:'Right',ArrowUp:'Up',ArrowDown:'Down',Home:'Home',End:'End',"
    "PageUp:'Page_Up',PageDown:'Page_Down'};\n"
    "c.addEventListener('keydown',e=>{const mods=[e.ctrlKey&&'ctrl',e.altKey&&'alt',e.metaKey&&"
    "'super'].filter(Boolean);\n"
    " if(K[e.key])send('press_key',{keys:[[...mods,e.shiftKey&&'shift',K[e.key]].filter(Boolean)"
    ".join('+')]});\n"
    " else if(mods.length&&e.key.toLowerCase()==='v')return;\n"
    " else if(e.key.length===1&&mods.length)send('press_key',{keys:[[...mods,e.key.toLowerCase()"
    "].join('+')]});\n"
    " else if(e.key.length===1)send('type_text',{text:e.key});else return;e.preventDefault()});\n"
    "document.addEventListener('paste',e=>{const t=e.clipboardData&&e.clipboardData.getData("
    "'text/plain');\n"
    " if(t){send('clipboard_write',{text:t});send('press_key',{keys:['ctrl+v']})}"
    "e.preventDefault()});\n"
    "</script></body></html>\n";

int liveview_page(struct req *rq, struct resp *rs)
{
    char org[STORE_ID], sid[STORE_ID];
    int rc = lv_forward(rq, rs, 0);
    if (rc != -1)
        return rc;
    rc = open_token(rq, org, sid);
    if (rc)
        return rc;
    resp_header(rs, "Cache-Control", "no-store");
    resp_header(rs, "Referrer-Policy", "no-referrer");
    resp_text(rs, 200, "text/html; charset=utf-8", xstrdup(page_html), sizeof page_html - 1);
    return 0;
}

/* ---- the record field ---- */

static void lv_render(struct session_ctx *sc, json_t *record)
{
    struct launch_settings ls;
    launch_settings_from_json(sc->doc, &ls);
    if (ls.headless || sc->rec->deleted_at)
        return;
    char mac[LIVEVIEW_MAC_HEX + 1];
    liveview_token_mac(sc->app->token_key, sizeof sc->app->token_key, sc->rec->org_id, sc->rec->id,
                       mac);
    const char *pub = sc->app->cfg.public_url;
    size_t n = strlen(pub);
    while (n && pub[n - 1] == '/')
        n--;
    char *url =
        xasprintf("%.*s/browser/live/%s.%s.%s", (int)n, pub, sc->rec->org_id, sc->rec->id, mac);
    json_object_set_new(record, "browser_live_view_url", json_string(url));
    xfree(url);
}

/* PATCH: is a viewer connected (the viewport rule's question)? */
static void lv_state(struct session_ctx *sc, struct sessrules_state *st)
{
    st->live_view_active = viewers_active(sc->app->viewers, sc->rec->id);
}

static const struct session_ext liveview_ext = {
    .name = "live_view",
    .state = lv_state,
    .render = lv_render,
};

/* Registered before main() runs (main.c is not this module's to edit). */
__attribute__((constructor)) static void liveview_register(void)
{
    session_ext_register(&liveview_ext);
}
