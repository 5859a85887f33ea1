/*
 * cli_call.c — `rckpt call`: a method of an object class, called on one
 * object, its reply printed (a diagnostic).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

static void hexdump(const unsigned char *p, size_t n)
{
	size_t i, j;
	for (i = 0; i < n; i += 16) {
		printf("%08zx ", i);
		for (j = i; j < i + 16; j++)
			j < n ? printf(" %02x", p[j]) : printf("   ");
		printf("  |");
		for (j = i; j < i + 16 && j < n; j++)
			putchar(p[j] >= 0x20 && p[j] < 0x7f ? p[j] : '.');
		printf("|\n");
	}
}

int rckpt_cli_call(int argc, char **argv, const rckpt_connect_opts_t *conn)
{
	const char *oid = "rckpt.probe", *input = "";
	int raw = 0, first, n;
	const cli_opt_t opts[] = {
		{ "object", 'o', &oid, NULL },
		{ "input", 'i', &input, NULL },
		{ "raw", 'r', NULL, &raw },
		{ NULL, 0, NULL, NULL },
	};
	size_t cap = 1u << 20;
	unsigned char *out;
	rckpt_t *h;

	if (cli_wants_help(argc, argv)) {
		printf("usage: rckpt [options] call [--object OID] [--input TEXT] [--raw] CLASS METHOD\n\n"
		       "Call METHOD of object class CLASS on object OID (default rckpt.probe) of the\n"
		       "pool and print the reply as a hex dump (--raw: the bytes as they are).\n"
		       "A diagnostic: a missing class or method, or one the OSD may not load, is\n"
		       "reported as such.\n");
		return 0;
	}
	if ((first = cli_parse_opts("call", opts, argc, argv)) < 0)
		return -first;
	if (argc - first != 2)
		return cli_usage_errorf(NULL, "call: %s", argc - first < 2 ? "needs CLASS and METHOD"
								 : "too many arguments");
	if (*oid == '\0')
		return cli_usage_errorf(NULL, "call: %s", "--object must not be empty");
	if ((h = cli_connect(conn, argv[0])) == NULL)
		return 1;
	out = malloc(cap);
	if (out == NULL) {
		cli_err("call", -ENOMEM, "out of memory");
		rckpt_destroy(h);
		return 1;
	}
	n = rckpt_plugin_call(h, out, cap, oid, argv[first], argv[first + 1], input, strlen(input));
	if (n < 0)
		cli_err("call", n, "%s", rckpt_errmsg(h));
	else if (raw)
		fwrite(out, 1, (size_t)n, stdout);
	else if (cli_json_mode()) {
		static const char hx[] = "0123456789abcdef";
		char *hex = malloc(2 * (size_t)n + 1);
		int i;
		for (i = 0; hex && i < n; i++) {
			hex[2 * i] = hx[out[i] >> 4];
			hex[2 * i + 1] = hx[out[i] & 15];
		}
		if (hex)
			hex[2 * n] = '\0';
		n = hex ? 0 : -ENOMEM;
		if (hex && cli_json_out(json_pack("{s:s, s:s, s:s, s:i, s:s}", "object", oid, "class", argv[first],
						  "method", argv[first + 1], "bytes", (int)(strlen(hex) / 2), "hex", hex),
					conn))
			n = -EIO;
		free(hex);
	}
	else {
		printf("%d bytes\n", n);
		hexdump(out, (size_t)n);
	}
	free(out);
	rckpt_destroy(h);
	return n < 0 ? 1 : 0;
}
