/*
 * rckpt_ssim.c — mean SSIM with a separable Gaussian window.
 */
#include "rckpt_ssim.h"

#include <math.h>
#include <stdlib.h>

#define WIN 11
#define C1 (0.01 * 255 * 0.01 * 255)
#define C2 (0.03 * 255 * 0.03 * 255)

static double ssim_one(double mx, double my, double vx, double vy, double cxy)
{
	return ((2 * mx * my + C1) * (2 * cxy + C2)) / ((mx * mx + my * my + C1) * (vx + vy + C2));
}

/* The whole image as one window, for images smaller than WIN. */
static double ssim_global(const uint8_t *a, const uint8_t *b, size_t n)
{
	double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, mx, my;
	size_t i;
	for (i = 0; i < n; i++) {
		sa += a[i];
		sb += b[i];
		saa += (double)a[i] * a[i];
		sbb += (double)b[i] * b[i];
		sab += (double)a[i] * b[i];
	}
	mx = sa / n;
	my = sb / n;
	return ssim_one(mx, my, saa / n - mx * mx, sbb / n - my * my, sab / n - mx * my);
}

double rckpt_ssim(const uint8_t *a, const uint8_t *b, unsigned w, unsigned h)
{
	double g[WIN], gs = 0, sum = 0;
	unsigned ow, oh, x, y, i, k;
	float *hz; /* 5 maps, horizontally filtered: a, b, aa, bb, ab */
	size_t plane;

	if (w == 0 || h == 0)
		return 1.0;
	if (w < WIN || h < WIN)
		return ssim_global(a, b, (size_t)w * h);
	for (i = 0; i < WIN; i++) {
		double d = (double)i - WIN / 2;
		g[i] = exp(-d * d / (2 * 1.5 * 1.5));
		gs += g[i];
	}
	for (i = 0; i < WIN; i++)
		g[i] /= gs;
	ow = w - WIN + 1;
	oh = h - WIN + 1;
	plane = (size_t)ow * h;
	hz = malloc(5 * plane * sizeof(*hz));
	if (hz == NULL)
		return -2;
	for (y = 0; y < h; y++) {
		const uint8_t *ra = a + (size_t)y * w, *rb = b + (size_t)y * w;
		for (x = 0; x < ow; x++) {
			double s[5] = { 0, 0, 0, 0, 0 };
			for (k = 0; k < WIN; k++) {
				double va = ra[x + k], vb = rb[x + k];
				s[0] += g[k] * va;
				s[1] += g[k] * vb;
				s[2] += g[k] * va * va;
				s[3] += g[k] * vb * vb;
				s[4] += g[k] * va * vb;
			}
			for (k = 0; k < 5; k++)
				hz[k * plane + (size_t)y * ow + x] = (float)s[k];
		}
	}
	for (y = 0; y < oh; y++) {
		double row = 0;
		for (x = 0; x < ow; x++) {
			double s[5] = { 0, 0, 0, 0, 0 };
			for (k = 0; k < WIN; k++) {
				size_t at = (size_t)(y + k) * ow + x;
				for (i = 0; i < 5; i++)
					s[i] += g[k] * hz[i * plane + at];
			}
			row += ssim_one(s[0], s[1], s[2] - s[0] * s[0], s[3] - s[1] * s[1],
					s[4] - s[0] * s[1]);
		}
		sum += row;
	}
	free(hz);
	return sum / ((double)ow * oh);
}
