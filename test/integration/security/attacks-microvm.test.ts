import { attackSuite } from './attack-suite.js';

await attackSuite('microvm');
