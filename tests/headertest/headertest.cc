// The public header alone, as C++ with -Wall -Wextra -pedantic -Werror.
#include "rckpt.h"

int rckpt_headertest_cxx();
int rckpt_headertest_cxx()
{
	rckpt_connect_opts_t o = RCKPT_CONNECT_OPTS_INIT;
	return static_cast<int>(o.version) + RCKPT_VERSION_NUMBER;
}
