// Types of the chart library's browser build, which the admin API serves at /dashboard/vendor/uPlot.esm.js.
import uPlot from 'uplot';
export default uPlot;
