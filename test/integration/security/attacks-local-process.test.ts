import { attackSuite } from './attack-suite.js';

await attackSuite('local_process');
