/* hello: smallest possible guest smoke test. */
#include <stdio.h>

int main(void)
{
	puts("hello from kbox guest");
	return 0;
}
