// A process whose main thread exits (pthread_exit) while another thread
// runs on for 60 s: its main thread shows state Z, and the process lives.
#include <pthread.h>
#include <unistd.h>
static void *sleeper(void *arg) { (void)arg; sleep(60); return 0; }
int main(void) {
	pthread_t t;
	pthread_create(&t, 0, sleeper, 0);
	pthread_exit(0);
}
