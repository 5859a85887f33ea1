/* The public header alone, as C11 with -Wall -Wextra -pedantic -Werror. */
#include "rckpt.h"

int rckpt_headertest_c(void);
int rckpt_headertest_c(void)
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	return (int)o.version + RCKPT_VERSION_NUMBER;
}
