/*
 * rckpt_ssim.h — structural similarity of two grayscale images, for the
 * fidelity of PCR groups. Not installed.
 */
#ifndef RCKPT_SSIM_H
#define RCKPT_SSIM_H

#include <stddef.h>
#include <stdint.h>

/* Mean SSIM (Wang et al. 2004: 11x11 Gaussian window, sigma 1.5, K1 0.01,
 * K2 0.03, L 255) of a and b, w x h 8-bit samples each, over the windows
 * that fit inside the image (an image smaller than a window: one window,
 * the whole image, unweighted). Returns the mean in [-1, 1], or -2 when
 * memory runs out. Deterministic: same inputs, same bits. */
double rckpt_ssim(const uint8_t *a, const uint8_t *b, unsigned w, unsigned h);

#endif
