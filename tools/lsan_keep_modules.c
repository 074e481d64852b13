/* Preloaded into MPI ranks by `tools/test --sanitize` (tools/lib.sh, tools/mpirun): dlclose does
 * nothing, so the Open MPI components that MPI_Finalize unloads stay mapped until
 * LeakSanitizer's check at exit. Unloaded, their allocations show as "<unknown module>" frames
 * that no suppression can name (Open MPI 4.1 has no option to keep them loaded); loaded, they
 * are either still reachable or named by tools/lsan.supp. Never used outside sanitized runs. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
