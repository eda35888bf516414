# What a matplotlib figure shows, as data an agent can read without looking at pixels: the chart
# shape of E2B's code interpreter (its `e2b/chart` format: line, scatter, bar, pie and box plots,
# several axes as a superchart), read from the figure's artists. Runs inside the python kernel of a
# code-interpreter context (kernel-python.py): kernel-bridge.py, given this source in its argv,
# writes it as agent_runner_charts.py on the kernel's PYTHONPATH, and startup.py's formatter
# imports it when a figure is shown. Written here, not taken from E2B's extractor, which needs
# pydantic.
import datetime
import math
import re

from matplotlib.collections import PathCollection
from matplotlib.dates import DateConverter, num2date
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Rectangle, Wedge
from matplotlib.text import Text

try:  # the converter matplotlib gives dates since 3.5
    from matplotlib.dates import _SwitchableDateConverter as SwitchableDateConverter
except ImportError:  # pragma: no cover - older matplotlib
    SwitchableDateConverter = DateConverter

DATE_CONVERTERS = (DateConverter, SwitchableDateConverter)
# "Time (s)" or "Price [USD]": the unit of an axis label.
UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")


def figure_chart(figure):
    """The figure's chart, or {} when it shows no data."""
    axes = figure.get_axes()
    if not any(ax.has_data() for ax in axes):
        return {}
    if len(axes) == 1:
        return axes_chart(axes[0])
    return {"type": "superchart", "title": figure._suptitle.get_text() if figure._suptitle else None,
            "elements": [axes_chart(ax) for ax in axes]}


def axes_chart(ax):
    kind = chart_type(ax)
    chart = {"type": kind, "title": ax.get_title() or None, "elements": []}
    if kind in ("line", "scatter", "bar", "box_and_whisker"):
        chart.update(labels_of(ax))
    if kind in ("line", "scatter"):
        chart.update(scales_of(ax))
        chart["elements"] = lines_of(ax) if kind == "line" else scatters_of(ax)
    elif kind == "bar":
        bars, horizontal = bars_of(ax)
        chart["elements"] = bars
        if horizontal:
            swap_axes(chart)
    elif kind == "pie":
        chart["elements"] = [{"label": wedge.get_label(), "angle": angle_value(abs(wedge.theta2 - wedge.theta1)), "radius": wedge.r}
                             for wedge in ax.patches]
    elif kind == "box_and_whisker":
        boxes, horizontal = boxes_of(ax)
        chart["elements"] = boxes
        if horizontal:
            swap_axes(chart)
    return chart


def chart_type(ax):
    # What the plotting calls added (not the spines, ticks and background get_children() also gives).
    artists = [artist for artist in ax._children if not isinstance(artist, Text)]
    if artists and all(isinstance(artist, Line2D) for artist in artists):
        return "line"
    if artists and all(isinstance(artist, (PathPatch, Line2D)) for artist in artists):
        return "box_and_whisker"
    artists = [artist for artist in artists if not (isinstance(artist, Line2D) and is_rule(artist))]
    for kind, classes in (("scatter", PathCollection), ("pie", Wedge), ("bar", Rectangle)):
        if artists and all(isinstance(artist, classes) for artist in artists):
            return kind
    return "unknown"


def is_rule(line):
    """A horizontal or vertical line of two points (axhline, a grid line): not data."""
    xs, ys = list(line.get_xdata()), list(line.get_ydata())
    return len(xs) == 2 and len(ys) == 2 and (xs[0] == xs[1] or ys[0] == ys[1])


def labels_of(ax):
    x_label, y_label = ax.get_xlabel() or None, ax.get_ylabel() or None
    return {"x_label": x_label, "y_label": y_label, "x_unit": unit_of(x_label), "y_unit": unit_of(y_label)}


def unit_of(label):
    match = UNIT.search(label) if label else None
    return (match.group(1) or match.group(2)) if match else None


def swap_axes(chart):
    for name in ("label", "unit"):
        chart["x_" + name], chart["y_" + name] = chart["y_" + name], chart["x_" + name]


def scales_of(ax):
    scales = {}
    for name, axis, scale in (("x", ax.xaxis, ax.get_xscale()), ("y", ax.yaxis, ax.get_yscale())):
        labels = [label.get_text() for label in axis.get_ticklabels()]
        is_date = isinstance(axis.converter, DATE_CONVERTERS)
        ticks = [num2date(tick).isoformat() if is_date else float(tick) for tick in axis.get_ticklocs()]
        scales[name + "_ticks"] = ticks
        scales[name + "_tick_labels"] = labels
        scales[name + "_scale"] = "datetime" if is_date else (scale if scale != "linear" else linear_or_categorical(ticks, labels))
    return scales


def linear_or_categorical(ticks, labels):
    """Categories are drawn at 0, 1, 2... and labelled with their names, not their positions."""
    if ticks and all(tick == index and label != str(index) for index, (tick, label) in enumerate(zip(ticks, labels))):
        return "categorical"
    return "linear"


def lines_of(ax):
    lines = []
    for line in ax.get_lines():
        if is_rule(line):
            continue
        label = line.get_label()
        if label.startswith("_child"):
            label = "Line " + label[len("_child"):]
        lines.append({"label": label, "points": [[point_value(x), point_value(y)] for x, y in zip(line.get_xdata(), line.get_ydata())]})
    return lines


def scatters_of(ax):
    return [{"label": collection.get_label(), "points": [[point_value(x), point_value(y)] for x, y in collection.get_offsets()]}
            for collection in ax.collections]


def bars_of(ax):
    """Each bar: the tick label under it, its value, its group (the legend label of its call to bar)."""
    bars, horizontal = [], False
    for container in ax.containers:
        group = container.get_label()
        if group.startswith("_container"):
            group = "Group " + group[len("_container"):]
        rectangles = list(container)
        heights = [rectangle.get_height() for rectangle in rectangles]
        # barh draws bars of one height and different widths.
        horizontal = len(rectangles) > 1 and all(height == heights[0] for height in heights)
        if horizontal:
            positions = [rectangle.get_y() + rectangle.get_height() / 2 for rectangle in rectangles]
            labels = tick_labels_at(ax.yaxis, positions)
            values = [rectangle.get_width() for rectangle in rectangles]
        else:
            positions = [rectangle.get_x() + rectangle.get_width() / 2 for rectangle in rectangles]
            labels = tick_labels_at(ax.xaxis, positions)
            values = heights
        bars.extend({"label": label, "value": number(value), "group": group} for label, value in zip(labels, values))
    return bars, horizontal


def tick_labels_at(axis, positions):
    """The tick label at each position (a bar's centre), or the position itself where no tick is."""
    ticks = {round(float(tick), 6): label.get_text() for tick, label in zip(axis.get_ticklocs(), axis.get_ticklabels())}
    return [ticks.get(round(float(position), 6)) or format_number(position) for position in positions]


def boxes_of(ax):
    """boxplot(patch_artist=True): each box a patch from the first to the third quartile, its lines the whiskers, caps, median and outliers."""
    patches = [patch for patch in ax.patches if isinstance(patch, PathPatch)]
    vertices = [patch.get_path().vertices for patch in patches]
    spans = [(min(v[:, 0]), max(v[:, 0]), min(v[:, 1]), max(v[:, 1])) for v in vertices]
    # Vertical boxes share a width and differ in height; horizontal ones the other way round.
    horizontal = len(spans) > 1 and all(span[3] - span[2] == spans[0][3] - spans[0][2] for span in spans)
    labels = [label.get_text() for label in (ax.get_yticklabels() if horizontal else ax.get_xticklabels())]
    boxes = []
    for index, (x0, x1, y0, y1) in enumerate(spans):
        across, along = ((y0, y1), (x0, x1)) if horizontal else ((x0, x1), (y0, y1))
        box = {"label": labels[index] if index < len(labels) else str(index + 1), "min": along[0], "first_quartile": along[0],
               "median": along[0], "third_quartile": along[1], "max": along[1], "outliers": []}
        for line in ax.lines:
            xs, ys = [float(x) for x in line.get_xdata()], [float(y) for y in line.get_ydata()]
            positions, values = (ys, xs) if horizontal else (xs, ys)
            if not positions or not all(across[0] - 1e-9 <= p <= across[1] + 1e-9 for p in positions):
                continue
            if line.get_linestyle() == "None":  # the fliers: markers only
                box["outliers"].extend(round_value(value) for value in values)
            elif len(values) == 2 and values[0] == values[1] and along[0] < values[0] < along[1]:
                box["median"] = values[0]
            elif len(values) == 2 and values[0] != values[1]:  # a whisker, from the box outwards
                box["min"] = min(box["min"], *values)
                box["max"] = max(box["max"], *values)
        boxes.append({key: (round_value(value) if isinstance(value, float) else value) for key, value in box.items()})
    return boxes, horizontal


def point_value(value):
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if type(value).__name__ == "datetime64":
        return str(value.astype("datetime64[s]"))
    return number(value) if isinstance(value, (int, float)) or hasattr(value, "item") else str(value)


def number(value):
    value = value.item() if hasattr(value, "item") else value
    return round_value(float(value)) if isinstance(value, float) else value


def round_value(value):
    """Twelve significant digits: what float arithmetic on the data leaves beyond them is noise."""
    return float("%.12g" % value)


def angle_value(value):
    """A wedge's angle: matplotlib computes its thetas in float32 (324 comes out 323.99999141693115),
    so it keeps 8 significant digits less its order of magnitude (6 for hundreds), as E2B's charts do."""
    if value == 0:
        return 0.0
    digits = max(1, 8 - math.floor(math.log10(abs(value))))
    return float("%.*g" % (digits, value))


def format_number(value):
    return "%g" % value
