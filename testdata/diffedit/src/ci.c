/* ci.c — a deterministic C program for faultline diff's edit tests
 * (testdata/diffedit/gen.sh edits it in ten behaviour-preserving ways).
 * ci SCALE: a table of SCALE MiB written once (256 × SCALE faults), 8000
 * list nodes, a row index with 64 rows of 16 KiB, and a buffer grown by
 * realloc to 512 KiB. Lines marked EDIT-* are where gen.sh edits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* EDIT-TOP */
struct node {
	struct node *next;
	char payload[56];
};

static void *must(void *p)
{
	if (p == NULL) {
		perror("ci");
		exit(1);
	}
	return p;
}

/* EDIT-NODES-BEGIN */
static struct node *make_nodes(int count)
{
	struct node *head = NULL;
	for (int i = 0; i < count; i++) {
		/* EDIT-IN-NODES */
		struct node *n = must(malloc(sizeof *n));
		memset(n->payload, i, sizeof n->payload);
		n->next = head;
		head = n;
	}
	return head;
}
/* EDIT-NODES-END */

/* EDIT-TABLE-BEGIN */
static char *make_table(size_t n)
{
	char *table = must(calloc(n, 1));
	memset(table, 7, n);
	return table;
}
/* EDIT-TABLE-END */

/* EDIT-ROWS-BEGIN */
static char **make_rows(int rows, size_t len)
{
	char **index = must(malloc(rows * sizeof *index));
	/* EDIT-BETWEEN */
	for (int i = 0; i < rows; i++) {
		index[i] = must(malloc(len));
		memset(index[i], i, len);
	}
	return index;
}
/* EDIT-ROWS-END */

static char *grow_buffer(size_t want)
{
	char *buf = NULL;
	for (size_t n = 4096; n <= want; n *= 2) {
		buf = must(realloc(buf, n));
		memset(buf, 3, n);
	}
	return buf;
}

int main(int argc, char **argv)
{
	int scale = argc > 1 ? atoi(argv[1]) : 1;
	struct node *list = make_nodes(8000);
	char *table = make_table((size_t)scale << 20);
	char **rows = make_rows(64, 16 << 10);
	char *buf = grow_buffer(512 << 10);
	long sum = table[0] + rows[63][0] + buf[0];
	for (struct node *n = list; n != NULL; n = n->next)
		sum += n->payload[0];
	printf("%ld\n", sum);
	return 0;
}
