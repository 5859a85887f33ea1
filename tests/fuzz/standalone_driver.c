/*
 * standalone_driver.c — runs a libFuzzer target over files and folders of
 * inputs without libFuzzer, so any compiler (and the sanitizer CI) replays
 * the corpora: standalone_driver PATH...
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		fprintf(stderr, "cannot read %s\n", path);
		if (f)
			fclose(f);
		return 1;
	}
	buf = malloc(n ? (size_t)n : 1); /* exact size, so ASan sees overreads */
	if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cannot read %s\n", path);
		free(buf);
		fclose(f);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

static int run_path(const char *path, unsigned *count)
{
	struct stat st;
	DIR *d;
	struct dirent *e;
	int bad = 0;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "no such input: %s\n", path);
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		++*count;
		return run_file(path);
	}
	d = opendir(path);
	if (d == NULL)
		return 1;
	while ((e = readdir(d)) != NULL) {
		char child[4096];
		if (e->d_name[0] == '.')
			continue;
		snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
		bad |= run_path(child, count);
	}
	closedir(d);
	return bad;
}

int main(int argc, char **argv)
{
	unsigned count = 0;
	int i, bad = 0;

	for (i = 1; i < argc; i++)
		bad |= run_path(argv[i], &count);
	printf("replayed %u input(s)\n", count);
	return bad || count == 0;
}
