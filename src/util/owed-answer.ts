/**
 * Runs a CLI's command while its answer is owed. Should the event loop empty before the
 * command settles (it awaits something no live handle will ever settle), node would exit 0 with
 * nothing printed, and `cli ... && next-step` would go on as if it had succeeded:
 * `onAbandoned` is called instead, and must answer and exit non-zero.
 */
export async function whileAnswerOwed<T>(command: Promise<T>, onAbandoned: () => void): Promise<T> {
  process.once('beforeExit', onAbandoned);
  try {
    return await command;
  } finally {
    process.off('beforeExit', onAbandoned);
  }
}
