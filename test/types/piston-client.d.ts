/** piston-client ships no types: what the Piston tests use of it, in Piston's own shapes. */
declare module 'piston-client' {
  interface PistonStage {
    stdout: string;
    stderr: string;
    output: string;
    code: number | null;
    signal: string | null;
  }
  interface PistonAnswer {
    language: string;
    version: string;
    run: PistonStage;
    compile: PistonStage;
    message: string;
  }
  interface PistonOptions {
    stdin?: string;
    args?: string[];
    runTimeout?: number;
    compileTimeout?: number;
  }
  export function piston(options: { server: string }): {
    runtimes(): Promise<unknown>;
    execute(language: string, code: string, options?: PistonOptions): Promise<PistonAnswer>;
  };
}
