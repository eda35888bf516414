/**
 * `work`, or the error `late()` makes once `ms` have passed first; the timer never outlives the
 * race. `work` goes on regardless (the caller undoes what it must), and its later failure is
 * not left unhandled.
 */
export async function withinDeadline<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  work.catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(late()), ms);
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}
