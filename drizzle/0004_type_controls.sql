CREATE TABLE `punctual_type_controls` (
	`type` varchar(64) NOT NULL,
	`paused` boolean NOT NULL DEFAULT false,
	`max_concurrency` int unsigned,
	`rate_per_second` decimal(10,3),
	`group_by` varchar(64),
	`updated_at` datetime(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
	CONSTRAINT `type_controls_type` PRIMARY KEY(`type`)
);
