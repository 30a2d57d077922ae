/* streamrace-handler-cost-shared: bench/handler_cost.cpp built into a shared object together
 * with the tracer's core, as libstreamrace.so is; this executable only starts it (main() is
 * the shared object's). There, every thread_local the handler touches is reached through a
 * call of __tls_get_addr, which the static executable's linker relaxes into a plain load: the
 * difference between the two is what the library's thread-local accesses cost a launch. */
extern int main(int argc, char** argv);
