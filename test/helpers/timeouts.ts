/**
 * The timeout of a run whose subject is not its timeout (a response's shape, an output cap, a
 * syntax error), in seconds: a bound no correct run comes near on any machine, under the
 * snippet ceiling (300 s), with the test's own deadline behind it. A tight one tests the machine,
 * not the code: on a loaded machine (a microVM under emulation beside other files) a python took
 * more than 10 s to print its syntax error and ended 124. A test of a timeout itself keeps its own
 * short one and asserts the timeout's path (124, "timed out"), never how long it took.
 */
export const NOT_THE_SUBJECT_TIMEOUT_S = 240;
