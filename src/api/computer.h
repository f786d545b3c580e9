/* Handlers of POST /browsers/{id}/computer/... (browsers.computer.*,
 * SESSION_API.md section 1): parse with domain/computer, act with
 * runtime/computer, render. Names carry compapi_ (computer_ is runtime's). */
#ifndef BD_API_COMPUTER_H
#define BD_API_COMPUTER_H

#include "http/http.h"

struct app;

/* Registers the module's session hook (state dropped when a session ends). */
void compapi_init(struct app *app);

int compapi_batch(struct req *rq, struct resp *rs);
int compapi_screenshot_post(struct req *rq, struct resp *rs);
int compapi_click(struct req *rq, struct resp *rs);
int compapi_drag(struct req *rq, struct resp *rs);
int compapi_move(struct req *rq, struct resp *rs);
int compapi_position(struct req *rq, struct resp *rs);
int compapi_press(struct req *rq, struct resp *rs);
int compapi_scroll(struct req *rq, struct resp *rs);
int compapi_cursor(struct req *rq, struct resp *rs);
int compapi_type(struct req *rq, struct resp *rs);
int compapi_clip_read(struct req *rq, struct resp *rs);
int compapi_clip_write(struct req *rq, struct resp *rs);

#endif
