/**
 * Prints one plain closing line that any CI log reader understands:
 *   tests: 337 passed, 0 failed, 0 skipped
 * (jest's own summary says "337 passed, 337 total", which counts failures only implicitly).
 */
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    // suites that failed to run at all count as failures too
    const failed = results.numFailedTests + results.numRuntimeErrorTestSuites;
    process.stdout.write(`\ntests: ${results.numPassedTests} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}

module.exports = SummaryReporter;
