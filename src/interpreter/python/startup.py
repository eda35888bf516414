# Run in a code-interpreter context's python kernel (kernel-python.py) before its first cell, by the
# bridge (kernel-bridge.py): the display formats E2B's code interpreter adds to IPython's, so that
# a cell's results carry them. `e2b/chart` is a matplotlib figure as data (charts.py) and
# `e2b/data` a pandas DataFrame as columns; both are computed only for those objects, and only
# when the cell imported the library (sys.modules), so `1 + 1` pays for neither.
import sys

from IPython import get_ipython
from IPython.core.formatters import BaseFormatter
from traitlets import ObjectName, Unicode


class ChartFormatter(BaseFormatter):
    format_type = Unicode("e2b/chart")
    print_method = ObjectName("_repr_e2b_chart_")
    _return_type = (dict,)

    def __call__(self, obj):
        if "matplotlib" not in sys.modules:
            return super().__call__(obj)
        from matplotlib.figure import Figure

        if not isinstance(obj, Figure):
            return super().__call__(obj)
        from agent_runner_charts import figure_chart

        try:
            return figure_chart(obj) or None
        except Exception:  # a figure this reader does not know keeps its image, without a chart
            return None


class DataFormatter(BaseFormatter):
    format_type = Unicode("e2b/data")
    print_method = ObjectName("_repr_e2b_data_")
    _return_type = (dict,)

    def __call__(self, obj):
        pandas = sys.modules.get("pandas")
        if pandas is None or not isinstance(obj, pandas.DataFrame):
            return super().__call__(obj)
        columns = obj.to_dict(orient="list")
        return {str(name): [value.isoformat() if isinstance(value, pandas.Timestamp) else value for value in values]
                for name, values in columns.items()}


shell = get_ipython()
formatter = shell.display_formatter
formatter.formatters["e2b/chart"] = ChartFormatter(parent=formatter)
formatter.formatters["e2b/data"] = DataFormatter(parent=formatter)
# A figure is shown as png, and svg too when asked (set_matplotlib_formats('png', 'svg')): read by
# matplotlib_inline when a cell first imports matplotlib, so `1 + 1` does not import it.
shell.config.InlineBackend.figure_formats = {"png"}
