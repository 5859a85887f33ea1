/*
 * golden_hex.h — reads a golden vector of tests/golden/ into bytes: hex
 * pairs, whitespace and '#' comments to the end of the line ignored.
 * Include after <cmocka.h>; the tests' shared reader of those files.
 */
#ifndef RCKPT_GOLDEN_HEX_H
#define RCKPT_GOLDEN_HEX_H

#include <stdint.h>
#include <stdio.h>

/* The bytes of the golden vector NAME (in RCKPT_GOLDEN_DIR) into
 * buf[0..cap); returns their count. Fails the test on a missing file,
 * an overflow or a half byte. */
static size_t golden_hex(const char *name, uint8_t *buf, size_t cap)
{
	char path[512];
	size_t n = 0;
	FILE *f;
	int c, hi = -1;

	snprintf(path, sizeof(path), "%s/%s", RCKPT_GOLDEN_DIR, name);
	f = fopen(path, "r");
	assert_non_null(f);
	while ((c = fgetc(f)) != EOF) {
		int d;
		if (c == '#') {
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
		if (d < 0)
			continue;
		if (hi < 0) {
			hi = d;
		} else {
			assert_true(n < cap);
			buf[n++] = (uint8_t)(hi << 4 | d);
			hi = -1;
		}
	}
	fclose(f);
	assert_int_equal(hi, -1);
	return n;
}

#endif
