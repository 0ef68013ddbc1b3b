/* alloc.c — a deterministic C program for faultline diff's noise tests
 * (testdata/diffnoise/gen.sh). alloc SCALE LOOPS: one buffer of SCALE × 2 MiB
 * written once (512 × SCALE faults), and LOOPS × 20000 nodes of 48 bytes
 * (malloc's 64-byte chunks: about 312 × LOOPS pages of heap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *next;
	char payload[40];
};

static char *make_buffer(size_t n)
{
	char *p = malloc(n);
	if (p == NULL)
		exit(1);
	memset(p, 1, n);
	return p;
}

static struct node *make_list(int count)
{
	struct node *head = NULL;
	for (int i = 0; i < count; i++) {
		/* MOVE-HERE: gen.sh adds a comment line below this one in the moved copy */
		struct node *n = malloc(sizeof *n);
		if (n == NULL)
			exit(1);
		memset(n->payload, i, sizeof n->payload);
		n->next = head;
		head = n;
	}
	return head;
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 1;
	int loops = argc > 2 ? atoi(argv[2]) : 1;
	char *buf = make_buffer((size_t)scale << 21);
	struct node *list = make_list(20000 * loops);
	long sum = buf[0];
	for (struct node *n = list; n != NULL; n = n->next)
		sum += n->payload[0];
	printf("%ld\n", sum);
	return 0;
}
