/* Handlers of POST /browsers/{id}/computer/... (browsers.computer.*,
 * SESSION_API.md section 1): parse with domain/computer, act with
 * runtime/computer, render. */
#ifndef BD_API_COMPUTER_H
#define BD_API_COMPUTER_H

#include "http/http.h"

struct app;

/* Registers the module's session hook (state dropped when a session ends). */
void computer_api_init(struct app *app);

int computer_batch(struct req *rq, struct resp *rs);
int computer_screenshot_post(struct req *rq, struct resp *rs);
int computer_click(struct req *rq, struct resp *rs);
int computer_drag(struct req *rq, struct resp *rs);
int computer_move(struct req *rq, struct resp *rs);
int computer_position(struct req *rq, struct resp *rs);
int computer_press(struct req *rq, struct resp *rs);
int computer_scroll(struct req *rq, struct resp *rs);
int computer_cursor(struct req *rq, struct resp *rs);
int computer_type(struct req *rq, struct resp *rs);
int computer_clip_read(struct req *rq, struct resp *rs);
int computer_clip_write(struct req *rq, struct resp *rs);

#endif
