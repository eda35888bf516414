import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { javaProgram } from '../../../src/languages/java-main-class.js';

describe('the class a java snippet starts from', () => {
  it('names the file after the public class, whatever it is called, and starts it', () => {
    const code =
      'import java.util.*;\n\npublic final class Greeter {\n  static class Helper { public static void main(String[] a) {} }\n  public static void main(String[] args) {}\n}\n';
    assert.deepEqual(javaProgram(code), { sourceFile: 'Greeter.java', mainClass: 'Greeter' });
  });

  it('reads no declaration out of comments or strings', () => {
    const code =
      '// public class Comment {}\n/* public class Block {} */\nclass Quiet { String s = "public class Text {"; char c = \'{\'; }\npublic class Real { public static void main(String[] a) {} }\n';
    assert.deepEqual(javaProgram(code), { sourceFile: 'Real.java', mainClass: 'Real' });
  });

  it('starts the top-level class declaring main when none is public, or another than the public one', () => {
    assert.deepEqual(javaProgram('class Helper {}\nclass App {\n  static public void main(String... a) {}\n}\n'), { sourceFile: 'App.java', mainClass: 'App' });
    assert.deepEqual(javaProgram('public interface Shape {}\nclass Run { public static void main(String[] a) {} }\n'), { sourceFile: 'Shape.java', mainClass: 'Run' });
  });

  it('qualifies the class with its package, and falls back to Main', () => {
    assert.deepEqual(javaProgram('package com.example.app;\n\npublic record Point(int x) { public static void main(String[] a) {} }\n'), {
      sourceFile: 'Point.java',
      mainClass: 'com.example.app.Point',
    });
    assert.deepEqual(javaProgram('System.out.println(1);'), { sourceFile: 'Main.java', mainClass: 'Main' });
  });
});
